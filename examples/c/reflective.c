/*
 * reflective.c -- reflective memory: a store by one host appears in every member's copy.
 *
 *   reflective member [KiB]            (each receiving host: joins broadcast segment 21)
 *   reflective writer [KiB] [rounds]   (the sending host)
 *
 * Each member creates segment 21 with SCI_FLAG_BROADCAST, prepares it on adapter 0 (which
 * makes it a member of the group of segment 21), maps it and waits. The writer connects to
 * DIS_BROADCAST_NODEID_GROUP_ALL, segment 21, with SCI_FLAG_BROADCAST, maps it and, `rounds`
 * times, stores a pattern into it and issues a store barrier (SCIStoreBarrier on a sequence
 * of the map: the stores have reached every member); then stores the round count into the
 * last word. Each member waits for that word and checks every byte of its copy. Built by
 * smartio's test suite with -Wall -Werror -Wextra.
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

#define SEGMENT_ID 21
#define ADAPTER 0

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint8_t pattern(size_t i, unsigned int round)
{
    return (uint8_t)((i * 13u) ^ (i >> 9) ^ (round * 29u));
}

static int member(sci_desc_t sd, unsigned int self, size_t bytes)
{
    sci_error_t err;
    sci_local_segment_t seg;
    sci_map_t map;
    SCICreateSegment(sd, &seg, SEGMENT_ID, bytes, NULL, NULL, SCI_FLAG_BROADCAST, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(seg, ADAPTER, SCI_FLAG_BROADCAST, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(seg, ADAPTER, SCI_FLAG_BROADCAST, &err);
    check("SCISetSegmentAvailable", err);
    volatile uint8_t *mem = SCIMapLocalSegment(seg, &map, 0, bytes, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    printf("member: node %u joined broadcast segment %d\n", self, SEGMENT_ID);
    fflush(stdout);
    volatile uint64_t *last = (volatile uint64_t *)(mem + bytes - 8);
    double deadline = now_s() + 60.0;
    while (*last == 0) {
        if (now_s() > deadline) {
            fprintf(stderr, "member: nothing arrived\n");
            return 1;
        }
        sched_yield();
    }
    unsigned int rounds = (unsigned int)*last;
    for (size_t i = 0; i < bytes - 8; i++) {
        if (mem[i] != pattern(i, rounds - 1)) {
            fprintf(stderr, "member: byte %zu is %u, not %u\n", i, mem[i],
                    pattern(i, rounds - 1));
            return 1;
        }
    }
    printf("member: node %u: %zu KiB of round %u verified\n", self, bytes >> 10, rounds);
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    return 0;
}

static int writer(sci_desc_t sd, size_t bytes, unsigned int rounds)
{
    sci_error_t err;
    sci_remote_segment_t group;
    sci_map_t map;
    sci_sequence_t seq;
    SCIConnectSegment(sd, &group, DIS_BROADCAST_NODEID_GROUP_ALL, SEGMENT_ID, ADAPTER, NULL, NULL,
                      30000, SCI_FLAG_BROADCAST, &err);
    check("SCIConnectSegment", err);
    volatile uint8_t *mem = SCIMapRemoteSegment(group, &map, 0, bytes, NULL, SCI_FLAG_BROADCAST,
                                                &err);
    check("SCIMapRemoteSegment", err);
    SCICreateMapSequence(map, &seq, SCI_NO_FLAGS, &err);
    check("SCICreateMapSequence", err);
    printf("writer: connected to broadcast segment %d (%zu bytes)\n", SEGMENT_ID,
           SCIGetRemoteSegmentSize(group));
    double start = now_s();
    for (unsigned int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < bytes - 8; i++) {
            mem[i] = pattern(i, r);
        }
        SCIStoreBarrier(seq, SCI_NO_FLAGS);
    }
    double took = now_s() - start;
    *(volatile uint64_t *)(mem + bytes - 8) = rounds;
    SCIStoreBarrier(seq, SCI_NO_FLAGS);
    printf("writer: %u rounds of %zu KiB to every member: %.1f MB/s\n", rounds, bytes >> 10,
           (double)(bytes - 8) * rounds / took / 1e6);
    SCIRemoveSequence(seq, SCI_NO_FLAGS, &err);
    check("SCIRemoveSequence", err);
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIDisconnectSegment(group, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s member [KiB] | writer [KiB] [rounds]\n", argv[0]);
        return 2;
    }
    int is_writer = strcmp(argv[1], "writer") == 0;
    size_t kib = argc > 2 ? strtoul(argv[2], NULL, 0) : 256;
    unsigned int rounds = argc > 3 ? (unsigned int)strtoul(argv[3], NULL, 0) : 4;
    if (kib == 0 || rounds == 0) {
        fprintf(stderr, "KiB and rounds are at least 1\n");
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
    int rc = is_writer ? writer(sd, kib << 10, rounds) : member(sd, self, kib << 10);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return rc;
}
