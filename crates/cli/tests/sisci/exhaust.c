/*
 * exhaust.c -- look-up-table limits seen from C: a mapper maps one remote segment again
 * and again until its adapter's look-up table is full, which must be SCI_ERR_HW_NOSPC
 * (never a crash), then gives every entry back and maps again.
 *
 *   exhaust owner                  segment 9 on adapter 0; waits until word 0 is 1
 *   exhaust mapper <node> [hold]   maps segment 9 of <node> until the table is full;
 *                                  with "hold", keeps everything and sleeps (to be killed)
 *
 * Run by crates/cli/tests/sisci.rs (built with -Wall -Werror against the installed
 * headers).
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEGMENT_ID 9
#define SIZE (64 * 1024)
#define MAX_MAPS 4096

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

static int owner(sci_desc_t sd)
{
    sci_error_t err;
    sci_local_segment_t seg;
    sci_map_t map;
    SCICreateSegment(sd, &seg, SEGMENT_ID, SIZE, NULL, NULL, SCI_NO_FLAGS, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(seg, 0, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(seg, 0, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    volatile uint32_t *word = SCIMapLocalSegment(seg, &map, 0, SIZE, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    printf("owner: segment %u ready\n", SCIGetLocalSegmentId(seg));
    fflush(stdout);
    while (*word != 1) {
        usleep(1000);
    }
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    while (SCIRemoveSegment(seg, SCI_NO_FLAGS, &err), err == SCI_ERR_BUSY) {
        usleep(1000);
    }
    check("SCIRemoveSegment", err);
    printf("owner: done\n");
    return 0;
}

static int mapper(sci_desc_t sd, unsigned int node, int hold)
{
    static sci_map_t maps[MAX_MAPS];
    sci_error_t err;
    sci_remote_segment_t remote;
    SCIConnectSegment(sd, &remote, node, SEGMENT_ID, 0, NULL, NULL, SCI_INFINITE_TIMEOUT,
                      SCI_NO_FLAGS, &err);
    check("SCIConnectSegment", err);
    int n = 0;
    for (;;) {
        if (n == MAX_MAPS) {
            fprintf(stderr, "%d maps and the table is not full\n", n);
            return 1;
        }
        volatile void *p = SCIMapRemoteSegment(remote, &maps[n], 0, SIZE, NULL, SCI_NO_FLAGS, &err);
        if (err != SCI_ERR_OK) {
            if (p != NULL) {
                fprintf(stderr, "a failed map returned an address\n");
                return 1;
            }
            break;
        }
        n++;
    }
    printf("mapper: %d maps, then %s\n", n, err == SCI_ERR_HW_NOSPC ? "SCI_ERR_HW_NOSPC" : "another error");
    fflush(stdout);
    if (err != SCI_ERR_HW_NOSPC) {
        fprintf(stderr, "the map after the last one failed with 0x%x\n", (unsigned)err);
        return 1;
    }
    if (hold) {
        printf("mapper: holding\n");
        fflush(stdout);
        for (;;) {
            pause();
        }
    }
    for (int i = 0; i < n; i++) {
        SCIUnmapSegment(maps[i], SCI_NO_FLAGS, &err);
        check("SCIUnmapSegment", err);
    }
    /* Every entry is back: a map works again, and ends the owner. */
    volatile uint32_t *word = SCIMapRemoteSegment(remote, &maps[0], 0, SIZE, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapRemoteSegment after unmapping", err);
    *word = 1;
    SCIUnmapSegment(maps[0], SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIDisconnectSegment(remote, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment", err);
    printf("mapper: every entry given back\n");
    return 0;
}

int main(int argc, char **argv)
{
    sci_error_t err;
    sci_desc_t sd;
    if (argc < 2) {
        fprintf(stderr, "usage: %s owner | mapper <node> [hold]\n", argv[0]);
        return 2;
    }
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);
    int rc;
    if (strcmp(argv[1], "owner") == 0) {
        rc = owner(sd);
    } else if (argc >= 3) {
        rc = mapper(sd, (unsigned int)strtoul(argv[2], NULL, 0), argc > 3 && strcmp(argv[3], "hold") == 0);
    } else {
        fprintf(stderr, "mapper needs a node id\n");
        return 2;
    }
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return rc;
}
