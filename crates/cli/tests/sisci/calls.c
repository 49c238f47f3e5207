/*
 * calls.c -- the rest of the base API from C: a segment made empty and given the program's
 * own buffer (SCIRegisterSegmentMemory), read and written by another host (SCIMemCpy,
 * sequences, SCICacheSync), an interrupt without data, queries, and the errors of calls
 * used wrongly.
 *
 *   calls owner          segment 11 on the program's buffer, interrupt 7; waits
 *   calls user <node>    connects to both, reads the buffer's bytes, writes new ones, rings
 *
 * Run by crates/cli/tests/sisci.rs (built with -Wall -Werror against the installed headers).
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEGMENT_ID 11
#define INTNO 7
#define SIZE (64 * 1024)

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

static void expect(const char *what, sci_error_t err, sci_error_t wanted, const char *name)
{
    if (err != wanted) {
        fprintf(stderr, "%s: 0x%x, not %s\n", what, (unsigned)err, name);
        exit(1);
    }
    printf("%s: %s\n", what, name);
}

static uint8_t a_byte(size_t i) { return (uint8_t)(i * 13 + 1); }
static uint8_t b_byte(size_t i) { return (uint8_t)(i * 29 + 7); }

static int owner(sci_desc_t sd)
{
    sci_error_t err;
    uint8_t *buf;
    if (posix_memalign((void **)&buf, 4096, SIZE) != 0) {
        return 1;
    }
    for (size_t i = 0; i < SIZE; i++) {
        buf[i] = a_byte(i);
    }
    sci_local_segment_t seg;
    sci_map_t map;
    SCICreateSegment(sd, &seg, SEGMENT_ID, SIZE, NULL, NULL, SCI_FLAG_EMPTY, &err);
    check("SCICreateSegment (empty)", err);
    SCIMapLocalSegment(seg, &map, 0, SIZE, NULL, SCI_NO_FLAGS, &err);
    expect("a map of an empty segment", err, SCI_ERR_ILLEGAL_OPERATION, "SCI_ERR_ILLEGAL_OPERATION");
    SCIRegisterSegmentMemory(buf + 1, SIZE - 4096, seg, SCI_NO_FLAGS, &err);
    expect("registering a misaligned buffer", err, SCI_ERR_ILLEGAL_ADDRESS, "SCI_ERR_ILLEGAL_ADDRESS");
    SCIRegisterSegmentMemory(buf, 1000, seg, SCI_NO_FLAGS, &err);
    expect("registering part of a page", err, SCI_ERR_SIZE_ALIGNMENT, "SCI_ERR_SIZE_ALIGNMENT");
    SCIAttachPhysicalMemory(0, NULL, 0, SIZE, seg, SCI_NO_FLAGS, &err);
    expect("attaching physical memory", err, SCI_ERR_NOT_IMPLEMENTED, "SCI_ERR_NOT_IMPLEMENTED");
    SCIRegisterSegmentMemory(buf, SIZE, seg, SCI_FLAG_LOCK_USER_MEM, &err);
    check("SCIRegisterSegmentMemory", err);
    for (size_t i = 0; i < SIZE; i++) {
        if (buf[i] != a_byte(i)) {
            fprintf(stderr, "registering changed byte %zu of the buffer\n", i);
            return 1;
        }
    }
    SCIPrepareSegment(seg, 0, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(seg, 0, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    sci_query_local_segment_t q;
    q.segment = seg;
    q.subcommand = SCI_Q_LOCAL_SEGMENT_PHYS_ADDR;
    SCIQuery(SCI_Q_LOCAL_SEGMENT, &q, SCI_NO_FLAGS, &err);
    check("SCIQuery (segment's physical address)", err);
    if (q.data.ioaddr == 0 || q.data.ioaddr % 4096 != 0) {
        fprintf(stderr, "a physical address of %#llx\n", (unsigned long long)q.data.ioaddr);
        return 1;
    }
    unsigned int bogus = 0;
    SCIQuery(0x7777, &bogus, SCI_NO_FLAGS, &err);
    expect("an unknown query", err, SCI_ERR_ILLEGAL_QUERY, "SCI_ERR_ILLEGAL_QUERY");

    sci_local_interrupt_t intr;
    unsigned int number = INTNO;
    SCICreateInterrupt(sd, &intr, 0, &number, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    check("SCICreateInterrupt", err);
    printf("owner: ready\n");
    fflush(stdout);
    SCIWaitForInterrupt(intr, 30000, SCI_NO_FLAGS, &err);
    check("SCIWaitForInterrupt", err);
    /* The other host wrote into this program's own buffer. */
    for (size_t i = 0; i < SIZE; i++) {
        if (buf[i] != b_byte(i)) {
            fprintf(stderr, "byte %zu of the buffer is not what the other host wrote\n", i);
            return 1;
        }
    }
    printf("owner: the other host's bytes are in the registered buffer\n");
    /* Still connected: the removal is refused, and the buffer stays the segment's (the
     * other host sees this store through its map). */
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    expect("removing a connected segment", err, SCI_ERR_BUSY, "SCI_ERR_BUSY");
    buf[0] = 0xee;
    while (SCIRemoveInterrupt(intr, SCI_NO_FLAGS, &err), err == SCI_ERR_BUSY) {
        usleep(1000);
    }
    check("SCIRemoveInterrupt", err);
    while (SCIRemoveSegment(seg, SCI_NO_FLAGS, &err), err == SCI_ERR_BUSY) {
        usleep(1000);
    }
    check("SCIRemoveSegment", err);
    /* The buffer is the program's again, with what it held. */
    for (size_t i = 0; i < SIZE; i++) {
        if (buf[i] != (i == 0 ? 0xee : b_byte(i))) {
            fprintf(stderr, "removing the segment changed byte %zu\n", i);
            return 1;
        }
    }
    memset(buf, 0x5a, SIZE);
    free(buf);
    printf("owner: the buffer is private again and keeps its bytes\n");
    return 0;
}

static int user(sci_desc_t sd, unsigned int node)
{
    sci_error_t err;
    sci_remote_segment_t remote;
    sci_map_t map;
    SCIConnectSegment(sd, &remote, node, SEGMENT_ID, 0, NULL, NULL, SCI_INFINITE_TIMEOUT,
                      SCI_NO_FLAGS, &err);
    check("SCIConnectSegment", err);
    volatile uint8_t *p = SCIMapRemoteSegment(remote, &map, 0, SIZE, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapRemoteSegment", err);
    for (size_t i = 0; i < SIZE; i++) {
        if (p[i] != a_byte(i)) {
            fprintf(stderr, "byte %zu of the remote segment is not the owner's buffer's\n", i);
            return 1;
        }
    }
    sci_sequence_t seq;
    SCICreateMapSequence(map, &seq, SCI_NO_FLAGS, &err);
    check("SCICreateMapSequence", err);
    sci_sequence_status_t status = SCIStartSequence(seq, SCI_NO_FLAGS, &err);
    check("SCIStartSequence", err);
    uint8_t *bytes = malloc(SIZE);
    if (bytes == NULL || status != SCI_SEQ_OK) {
        return 1;
    }
    for (size_t i = 0; i < SIZE; i++) {
        bytes[i] = b_byte(i);
    }
    SCIMemCpy(seq, bytes, map, 0, SIZE, SCI_NO_FLAGS, &err);
    check("SCIMemCpy", err);
    SCIMemWrite(bytes, p, SIZE, SCI_NO_FLAGS, &err);
    check("SCIMemWrite", err);
    SCIStoreBarrier(seq, SCI_NO_FLAGS);
    if (memcmp(bytes, (const void *)p, SIZE) != 0) {
        fprintf(stderr, "SCIMemWrite's bytes differ\n");
        return 1;
    }
    printf("user: SCIMemWrite's bytes read back\n");
    int reachable = SCIProbeNode(sd, 0, node, SCI_NO_FLAGS, &err);
    check("SCIProbeNode", err);
    printf("user: node %u reachable: %d\n", node, reachable);
    reachable = SCIProbeNode(sd, 0, 200, SCI_NO_FLAGS, &err);
    expect("probing a node id no adapter has", err, SCI_ERR_NO_SUCH_NODEID,
           "SCI_ERR_NO_SUCH_NODEID");
    printf("user: node 200 reachable: %d\n", reachable);
    unsigned int alignment = 0;
    sci_query_adapter_t qa;
    qa.localAdapterNo = 0;
    qa.portNo = 0;
    qa.subcommand = SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT;
    qa.data = &alignment;
    SCIQuery(SCI_Q_ADAPTER, &qa, SCI_NO_FLAGS, &err);
    check("SCIQuery (DMA offset alignment)", err);
    printf("user: DMA offset alignment %u\n", alignment);
    dis_nodeId_list_t ids;
    dis_virt_adapter_t kind;
    char by_host[] = "lender", by_adapter[] = "lender.ntb0", by_nobody[] = "nobody";
    SCIGetNodeIdByAdapterName(by_host, &ids, &kind, SCI_NO_FLAGS, &err);
    check("SCIGetNodeIdByAdapterName (host)", err);
    printf("user: lender's node ids: %u %u\n", ids[0], ids[1]);
    SCIGetNodeIdByAdapterName(by_adapter, &ids, &kind, SCI_NO_FLAGS, &err);
    check("SCIGetNodeIdByAdapterName (adapter)", err);
    printf("user: lender.ntb0's node id: %u\n", ids[0]);
    SCIGetNodeIdByAdapterName(by_nobody, &ids, &kind, SCI_NO_FLAGS, &err);
    check("SCIGetNodeIdByAdapterName (nobody)", err);
    printf("user: nobody's node id: %u\n", ids[0]);
    SCIMemCpy(seq, bytes, map, 8, SIZE, SCI_NO_FLAGS, &err);
    expect("a copy past the map's end", err, SCI_ERR_OUT_OF_RANGE, "SCI_ERR_OUT_OF_RANGE");
    status = SCICheckSequence(seq, SCI_NO_FLAGS, &err);
    check("SCICheckSequence", err);
    if (status != SCI_SEQ_OK) {
        return 1;
    }
    SCICacheSync(map, (void *)p, SIZE, SCI_FLAG_CACHE_FLUSH, &err);
    check("SCICacheSync", err);
    SCIRemoveSequence(seq, SCI_NO_FLAGS, &err);
    check("SCIRemoveSequence", err);
    free(bytes);

    SCIDisconnectSegment(remote, SCI_NO_FLAGS, &err);
    expect("disconnecting a mapped segment", err, SCI_ERR_BUSY, "SCI_ERR_BUSY");
    sci_remote_interrupt_t ring;
    SCIConnectInterrupt(sd, &ring, node, 0, INTNO, SCI_INFINITE_TIMEOUT, SCI_NO_FLAGS, &err);
    check("SCIConnectInterrupt", err);
    SCITriggerInterrupt(ring, SCI_NO_FLAGS, &err);
    check("SCITriggerInterrupt", err);
    /* The owner's refused removal leaves its buffer shared: its store arrives here. */
    while (p[0] != 0xee) {
        usleep(100);
    }
    printf("user: the owner's store after a refused removal arrived\n");
    SCIDisconnectInterrupt(ring, SCI_NO_FLAGS, &err);
    check("SCIDisconnectInterrupt", err);
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIDisconnectSegment(remote, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    printf("user: read the owner's buffer, wrote it and rang\n");
    return 0;
}

int main(int argc, char **argv)
{
    sci_error_t err;
    sci_desc_t sd;
    if (argc < 2) {
        fprintf(stderr, "usage: %s owner | user <node>\n", argv[0]);
        return 2;
    }
    sci_desc_t early;
    SCIOpen(&early, SCI_NO_FLAGS, &err);
    expect("SCIOpen before SCIInitialize", err, SCI_ERR_NOT_INITIALIZED, "SCI_ERR_NOT_INITIALIZED");
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);
    int rc = strcmp(argv[1], "owner") == 0 ? owner(sd)
                                           : user(sd, (unsigned int)strtoul(argc > 2 ? argv[2] : "0", NULL, 0));
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return rc;
}
