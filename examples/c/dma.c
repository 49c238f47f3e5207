/*
 * dma.c -- the NTB adapter's DMA engine moves bytes between a local segment and another
 * host's segment through a SISCI DMA queue, both ways, and every byte is checked.
 *
 *   dma server <client node id>                     (the host whose segment is remote)
 *   dma client <server node id> [MiB] [rounds]      (the host whose adapter moves bytes)
 *
 * The server creates segment 11 (a control page, then the data) and waits. The client
 * creates a local segment of twice the data, prepared on adapter 0, connects to segment
 * 11, and through a queue of 16 entries: pushes its first half into the server's data
 * (SCIStartDmaTransfer, `rounds` times, timed), pulls the server's data back into its
 * second half as a vector of two entries (SCIStartDmaTransferVec with SCI_FLAG_DMA_READ,
 * timed), checks both, runs one transfer with a callback and one with SCI_FLAG_DMA_WAIT,
 * shows two refusals, and then tells the server (word 0 of its control page), which checks
 * the bytes it received. Built by smartio's test suite with -Wall -Werror -Wextra.
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEGMENT_ID 11
#define ADAPTER 0
#define CONTROL 4096
#define QUEUE_ENTRIES 16

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

/* The name of an error, as SCIGetErrorString begins it. */
static void print_refusal(const char *what, sci_error_t err)
{
    const char *s = SCIGetErrorString(err);
    int len = (int)strcspn(s, ":");
    printf("client: %s: %.*s\n", what, len, s);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint8_t pattern(size_t i)
{
    return (uint8_t)((i * 7u) ^ (i >> 11) ^ 0x5a);
}

static const char *state_name(sci_dma_queue_state_t s)
{
    switch (s) {
    case SCI_DMAQUEUE_IDLE:
        return "SCI_DMAQUEUE_IDLE";
    case SCI_DMAQUEUE_GATHER:
        return "SCI_DMAQUEUE_GATHER";
    case SCI_DMAQUEUE_POSTED:
        return "SCI_DMAQUEUE_POSTED";
    case SCI_DMAQUEUE_DONE:
        return "SCI_DMAQUEUE_DONE";
    case SCI_DMAQUEUE_ABORTED:
        return "SCI_DMAQUEUE_ABORTED";
    case SCI_DMAQUEUE_ERROR:
        return "SCI_DMAQUEUE_ERROR";
    }
    return "?";
}

static volatile int callback_status = -1;

static sci_callback_action_t on_done(void *arg, sci_dma_queue_t queue, sci_error_t status)
{
    (void)queue;
    *(volatile int *)arg = 1;
    callback_status = (int)status;
    return SCI_CALLBACK_CANCEL;
}

static int server(sci_desc_t sd, size_t bytes)
{
    sci_error_t err;
    sci_local_segment_t seg;
    sci_map_t map;
    SCICreateSegment(sd, &seg, SEGMENT_ID, CONTROL + bytes, NULL, NULL, SCI_NO_FLAGS, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(seg, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    volatile uint8_t *mem = SCIMapLocalSegment(seg, &map, 0, CONTROL + bytes, NULL,
                                               SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    SCISetSegmentAvailable(seg, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    printf("server: segment %d of %zu bytes ready\n", SEGMENT_ID, CONTROL + bytes);
    fflush(stdout);
    volatile uint64_t *word = (volatile uint64_t *)mem;
    double deadline = now_s() + 60.0;
    while (*word == 0) {
        if (now_s() > deadline) {
            fprintf(stderr, "server: the client never said it was done\n");
            return 1;
        }
        sched_yield();
    }
    for (size_t i = 0; i < bytes; i++) {
        if (mem[CONTROL + i] != pattern(i)) {
            fprintf(stderr, "server: byte %zu is %u, not %u\n", i, mem[CONTROL + i],
                    pattern(i));
            return 1;
        }
    }
    printf("server: %zu MiB pushed by the client's DMA engine verified\n", bytes >> 20);
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    /* The client disconnects when it is done: until then the segment is busy. */
    do {
        SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
        if (err == SCI_ERR_BUSY) {
            sched_yield();
        }
    } while (err == SCI_ERR_BUSY && now_s() < deadline);
    check("SCIRemoveSegment", err);
    return 0;
}

static int client(sci_desc_t sd, unsigned int peer, size_t bytes, unsigned int rounds)
{
    sci_error_t err;
    sci_local_segment_t local;
    sci_remote_segment_t remote;
    sci_map_t local_map, remote_map;
    sci_dma_queue_t queue, spare;

    SCICreateSegment(sd, &local, 0, 2 * bytes, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(local, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    uint8_t *mem = SCIMapLocalSegment(local, &local_map, 0, 2 * bytes, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    for (size_t i = 0; i < bytes; i++) {
        mem[i] = pattern(i);
    }
    SCIConnectSegment(sd, &remote, peer, SEGMENT_ID, ADAPTER, NULL, NULL, 30000, SCI_NO_FLAGS,
                      &err);
    check("SCIConnectSegment", err);
    volatile uint8_t *far = SCIMapRemoteSegment(remote, &remote_map, 0, CONTROL + bytes, NULL,
                                                SCI_NO_FLAGS, &err);
    check("SCIMapRemoteSegment", err);
    SCICreateDMAQueue(sd, &queue, ADAPTER, QUEUE_ENTRIES, SCI_NO_FLAGS, &err);
    check("SCICreateDMAQueue", err);
    printf("client: queue of %d entries on adapter %d, state %s\n", QUEUE_ENTRIES, ADAPTER,
           state_name(SCIDMAQueueState(queue)));

    /* Push: local [0, bytes) to remote [CONTROL, CONTROL + bytes). */
    double start = now_s();
    sci_dma_queue_state_t state = SCI_DMAQUEUE_IDLE;
    for (unsigned int r = 0; r < rounds; r++) {
        SCIStartDmaTransfer(queue, local, remote, 0, bytes, CONTROL, NULL, NULL, SCI_NO_FLAGS,
                            &err);
        check("SCIStartDmaTransfer", err);
        state = SCIWaitForDMAQueue(queue, SCI_INFINITE_TIMEOUT, SCI_NO_FLAGS, &err);
        check("SCIWaitForDMAQueue", err);
    }
    double took = now_s() - start;
    printf("client: write %zu MiB x %u: %.1f MB/s, queue %s\n", bytes >> 20, rounds,
           (double)bytes * rounds / took / 1e6, state_name(state));
    for (size_t i = 0; i < bytes; i++) {
        if (far[CONTROL + i] != pattern(i)) {
            fprintf(stderr, "client: remote byte %zu is %u, not %u\n", i, far[CONTROL + i],
                    pattern(i));
            return 1;
        }
    }

    /* Pull: remote data back into local [bytes, 2 * bytes), as two entries. */
    dis_dma_vec_t vec[2] = {
        {bytes / 2, bytes, CONTROL, 0},
        {bytes - bytes / 2, bytes + bytes / 2, CONTROL + bytes / 2, 0},
    };
    start = now_s();
    for (unsigned int r = 0; r < rounds; r++) {
        memset(mem + bytes, 0, bytes);
        SCIStartDmaTransferVec(queue, local, remote, 2, vec, NULL, NULL, SCI_FLAG_DMA_READ, &err);
        check("SCIStartDmaTransferVec", err);
        state = SCIWaitForDMAQueue(queue, SCI_INFINITE_TIMEOUT, SCI_NO_FLAGS, &err);
        check("SCIWaitForDMAQueue", err);
    }
    took = now_s() - start;
    printf("client: read %zu MiB x %u: %.1f MB/s, queue %s\n", bytes >> 20, rounds,
           (double)bytes * rounds / took / 1e6, state_name(state));
    if (memcmp(mem, mem + bytes, bytes) != 0) {
        fprintf(stderr, "client: the pulled bytes differ from what was pushed\n");
        return 1;
    }
    printf("client: every byte verified both ways\n");

    /* A callback on a library thread, and a start that waits. */
    volatile int called = 0;
    SCIStartDmaTransfer(queue, local, remote, 0, 4096, CONTROL, on_done, (void *)&called,
                        SCI_FLAG_USE_CALLBACK, &err);
    check("SCIStartDmaTransfer (callback)", err);
    double deadline = now_s() + 30.0;
    while (!called && now_s() < deadline) {
        sched_yield();
    }
    printf("client: callback called: %s, status %s\n", called ? "yes" : "no",
           callback_status == SCI_ERR_OK ? "SCI_ERR_OK" : "an error");
    SCIWaitForDMAQueue(queue, SCI_INFINITE_TIMEOUT, SCI_NO_FLAGS, &err);
    check("SCIWaitForDMAQueue", err);
    SCIStartDmaTransfer(queue, local, remote, 0, 4096, CONTROL, NULL, NULL, SCI_FLAG_DMA_WAIT,
                        &err);
    check("SCIStartDmaTransfer (wait)", err);
    printf("client: SCI_FLAG_DMA_WAIT returned with the queue %s\n",
           state_name(SCIDMAQueueState(queue)));

    /* Refusals. */
    SCIStartDmaTransfer(queue, local, remote, 0, 4096, CONTROL, NULL, NULL, SCI_FLAG_DMA_SYSDMA,
                        &err);
    print_refusal("the system DMA engine", err);
    SCIStartDmaTransfer(queue, local, remote, 0, bytes, CONTROL + 8, NULL, NULL, SCI_NO_FLAGS,
                        &err);
    print_refusal("past the remote segment's end", err);
    SCIStartDmaTransfer(queue, local, remote, 0, 4096, CONTROL, NULL, NULL, SCI_FLAG_USE_CALLBACK,
                        &err);
    print_refusal("a callback flag without a callback", err);
    dis_dma_vec_t many[DIS_DMA_MAX_VECLEN + 1];
    for (size_t i = 0; i <= DIS_DMA_MAX_VECLEN; i++) {
        many[i].size = 64;
        many[i].local_offset = 64 * i;
        many[i].remote_offset = CONTROL;
        many[i].flags = 0;
    }
    SCIStartDmaTransferVec(queue, local, remote, DIS_DMA_MAX_VECLEN + 1, many, NULL, NULL,
                           SCI_NO_FLAGS, &err);
    print_refusal("a vector longer than DIS_DMA_MAX_VECLEN", err);
    SCICreateDMAQueue(sd, &spare, ADAPTER, QUEUE_ENTRIES, SCI_NO_FLAGS, &err);
    print_refusal("a second queue on the adapter", err);

    /* Tell the server, and clean up. */
    *(volatile uint64_t *)far = 1;
    SCIFlush(NULL, SCI_NO_FLAGS);
    SCIRemoveDMAQueue(queue, SCI_NO_FLAGS, &err);
    check("SCIRemoveDMAQueue", err);
    SCIUnmapSegment(remote_map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIDisconnectSegment(remote, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    SCIUnmapSegment(local_map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIRemoveSegment(local, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    printf("client: done\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s server <client node> | client <server node> [MiB] [rounds]\n",
                argv[0]);
        return 2;
    }
    int is_server = strcmp(argv[1], "server") == 0;
    unsigned int peer = (unsigned int)strtoul(argv[2], NULL, 0);
    size_t mib = argc > 3 ? strtoul(argv[3], NULL, 0) : 4;
    unsigned int rounds = argc > 4 ? (unsigned int)strtoul(argv[4], NULL, 0) : 8;
    if (mib == 0 || rounds == 0) {
        fprintf(stderr, "MiB and rounds are at least 1\n");
        return 2;
    }
    sci_error_t err;
    sci_desc_t sd;
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);
    unsigned int self;
    SCIGetLocalNodeId(ADAPTER, &self, SCI_NO_FLAGS, &err);
    check("SCIGetLocalNodeId", err);
    printf("%s: node %u, peer node %u\n", is_server ? "server" : "client", self, peer);
    int rc = is_server ? server(sd, mib << 20) : client(sd, peer, mib << 20, rounds);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return rc;
}
