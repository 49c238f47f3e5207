/*
 * pingpong.c -- two programs on two hosts bounce a counter through each other's segments
 * (SISCI shared memory over the NTB), then the initiator writes 1 MiB blocks into the
 * responder's segment and the responder checks every byte.
 *
 *   pingpong <peer node id> initiator|responder [rounds]
 *
 * Each side creates segment 7 on adapter 0, makes it available, connects to the peer's
 * segment 7 and maps both. Word 0 of a side's segment is written only by its peer.
 * Built by smartio's test suite with -Wall -Werror against the installed headers.
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define SEGMENT_ID 7
#define ADAPTER 0
#define DATA_OFFSET 4096
#define BLOCK (1 << 20)
#define SEGMENT_SIZE (DATA_OFFSET + BLOCK)
#define BLOCKS 256

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Waits until the peer has written `value` into word 0 of our segment: spinning, and
 * giving the core away now and then (the peer may share it). */
static void await_word(volatile uint64_t *word, uint64_t value)
{
    for (unsigned int spins = 0; *word != value; spins++) {
        if (spins % 4096 == 4095) {
            sched_yield();
        }
    }
}

static uint8_t pattern(size_t i)
{
    return (uint8_t)((i * 7u) ^ (i >> 11));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <peer node id> initiator|responder [rounds]\n", argv[0]);
        return 2;
    }
    unsigned int peer = (unsigned int)strtoul(argv[1], NULL, 0);
    int initiator = strcmp(argv[2], "initiator") == 0;
    uint64_t rounds = argc > 3 ? strtoull(argv[3], NULL, 0) : 10000;

    sci_error_t err;
    sci_desc_t sd;
    sci_local_segment_t local;
    sci_remote_segment_t remote;
    sci_map_t local_map, remote_map;

    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);

    unsigned int self;
    SCIGetLocalNodeId(ADAPTER, &self, SCI_NO_FLAGS, &err);
    check("SCIGetLocalNodeId", err);

    SCICreateSegment(sd, &local, SEGMENT_ID, SEGMENT_SIZE, NULL, NULL, SCI_NO_FLAGS, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(local, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(local, ADAPTER, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    volatile uint64_t *mine = SCIMapLocalSegment(local, &local_map, 0, SEGMENT_SIZE, NULL,
                                                 SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);

    SCIConnectSegment(sd, &remote, peer, SEGMENT_ID, ADAPTER, NULL, NULL, SCI_INFINITE_TIMEOUT,
                      SCI_NO_FLAGS, &err);
    check("SCIConnectSegment", err);
    if (SCIGetRemoteSegmentSize(remote) != SEGMENT_SIZE || SCIGetRemoteSegmentNodeId(remote) != peer) {
        fprintf(stderr, "the remote segment is not the one asked for\n");
        return 1;
    }
    volatile uint64_t *theirs = (volatile uint64_t *)SCIMapRemoteSegment(
        remote, &remote_map, 0, SEGMENT_SIZE, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapRemoteSegment", err);
    printf("node %u: connected to node %u\n", self, peer);
    fflush(stdout);

    /* Ping-pong: the initiator writes i, the responder answers i. */
    double start = now_ns();
    for (uint64_t i = 1; i <= rounds; i++) {
        if (initiator) {
            theirs[0] = i;
            SCIFlush(NULL, SCI_NO_FLAGS);
            await_word(mine, i);
        } else {
            await_word(mine, i);
            theirs[0] = i;
            SCIFlush(NULL, SCI_NO_FLAGS);
        }
    }
    double elapsed = now_ns() - start;
    if (initiator) {
        printf("round trip: %llu rounds, %.0f ns mean\n", (unsigned long long)rounds,
               elapsed / (double)rounds);
    }

    /* Bandwidth: 1 MiB blocks into the responder's segment; the last block's bytes are
     * checked by the responder. */
    uint8_t *block = malloc(BLOCK);
    if (block == NULL) {
        return 1;
    }
    for (size_t i = 0; i < BLOCK; i++) {
        block[i] = pattern(i);
    }
    if (initiator) {
        volatile uint8_t *data = (volatile uint8_t *)theirs + DATA_OFFSET;
        start = now_ns();
        for (int b = 0; b < BLOCKS; b++) {
            memcpy((void *)data, block, BLOCK);
        }
        SCIFlush(NULL, SCI_NO_FLAGS);
        elapsed = now_ns() - start;
        printf("remote write: %d x 1 MiB, %.2f GB/s\n", BLOCKS,
               (double)BLOCKS * BLOCK / elapsed);
        theirs[0] = rounds + 1;
        await_word(mine, rounds + 2);
        printf("responder verified the data\n");
    } else {
        await_word(mine, rounds + 1);
        const volatile uint8_t *data = (const volatile uint8_t *)mine + DATA_OFFSET;
        size_t bad = 0;
        for (size_t i = 0; i < BLOCK; i++) {
            bad += data[i] != block[i];
        }
        if (bad != 0) {
            fprintf(stderr, "%zu bytes differ from what the initiator wrote\n", bad);
            return 1;
        }
        printf("node %u: 1 MiB from node %u verified\n", self, peer);
        theirs[0] = rounds + 2;
    }
    free(block);

    SCIUnmapSegment(remote_map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment (remote)", err);
    SCIDisconnectSegment(remote, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    SCIUnmapSegment(local_map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment (local)", err);
    /* The peer may still be connected to our segment: removal is busy until it leaves. */
    for (;;) {
        SCIRemoveSegment(local, SCI_NO_FLAGS, &err);
        if (err != SCI_ERR_BUSY) {
            break;
        }
        usleep(1000);
    }
    check("SCIRemoveSegment", err);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return 0;
}
