/*
 * segment-memory.c -- the cluster daemon's segment memory, measured and checked from a SISCI
 * program (docs/sisci.md, "Segment memory").
 *
 *   segment-memory limits            sizes and descriptors refused or accepted as SISCI does
 *   segment-memory churn MIB CYCLES  create, map, fill, check, remove a MIB segment CYCLES times
 *   segment-memory big MIB           create one MIB segment (timed), touch both ends, remove
 *   segment-memory probe SECONDS     time a daemon round trip (SCIGetLocalNodeId) over and
 *                                    over: the longest wait shows whether another program's
 *                                    request stalled the daemon
 *
 * Run as a program of an emulated host (SMARTIO_HOST, SMARTIO_SOCKET). Build:
 *   cc -I PREFIX/include -I PREFIX/include/dis scripts/segment-memory.c -L PREFIX/lib64 \
 *      -lsisci -Wl,-rpath,PREFIX/lib64 -o segment-memory
 * The test suite builds it with -Wall -Werror -Wextra and runs every mode.
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MIB ((size_t)1 << 20)
#define PAGE 4096

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

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Sizes refused at once, a descriptor closable after a refused registration, and a
 * registered buffer's size as the segment's size. */
static int limits(sci_desc_t sd)
{
    sci_error_t err;
    sci_local_segment_t seg;
    sci_map_t map;

    SCICreateSegment(sd, &seg, 0, 0, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    expect("a segment of 0 bytes", err, SCI_ERR_SIZE_ALIGNMENT, "SCI_ERR_SIZE_ALIGNMENT");
    SCICreateSegment(sd, &seg, 0, (size_t)1 << 50, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    expect("a segment larger than the host's RAM", err, SCI_ERR_NOSPC, "SCI_ERR_NOSPC");

    /* A buffer smaller than the segment asked for: the segment is the buffer. */
    size_t asked = 64 * 1024, given = 16 * 1024;
    uint8_t *buf = mmap(NULL, asked, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t i = 0; i < given; i++) {
        buf[i] = (uint8_t)(i * 31 + 3);
    }
    SCICreateSegment(sd, &seg, 0, asked, NULL, NULL, SCI_FLAG_AUTO_ID | SCI_FLAG_EMPTY, &err);
    check("SCICreateSegment (empty)", err);
    SCIRegisterSegmentMemory(buf, given, seg, SCI_NO_FLAGS, &err);
    check("SCIRegisterSegmentMemory", err);
    SCIRegisterSegmentMemory(buf, given, seg, SCI_NO_FLAGS, &err);
    expect("registering a second buffer", err, SCI_ERR_ILLEGAL_OPERATION,
           "SCI_ERR_ILLEGAL_OPERATION");
    size_t size = SCIGetLocalSegmentSize(seg);
    printf("the segment's size after registering %zu of %zu bytes: %zu\n", given, asked, size);
    volatile uint8_t *p = SCIMapLocalSegment(seg, &map, 0, size, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment of its size", err);
    for (size_t i = 0; i < given; i++) {
        if (p[i] != (uint8_t)(i * 31 + 3)) {
            fprintf(stderr, "byte %zu of the registered buffer differs in the map\n", i);
            return 1;
        }
    }
    printf("the map of its size holds the buffer's bytes\n");
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIMapLocalSegment(seg, &map, 0, size + PAGE, NULL, SCI_NO_FLAGS, &err);
    expect("a map past its size", err, SCI_ERR_OUT_OF_RANGE, "SCI_ERR_OUT_OF_RANGE");
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    expect("closing the descriptor after a refused registration", err, SCI_ERR_OK, "SCI_ERR_OK");
    munmap(buf, asked);
    return 0;
}

/* A segment of `bytes`, mapped: fresh memory reads as zeroes; filled and checked. */
static int cycle(sci_desc_t sd, size_t bytes, unsigned int round)
{
    sci_error_t err;
    sci_local_segment_t seg;
    sci_map_t map;
    SCICreateSegment(sd, &seg, 0, bytes, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    check("SCICreateSegment", err);
    uint8_t *p = (uint8_t *)SCIMapLocalSegment(seg, &map, 0, bytes, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    for (size_t i = 0; i < bytes; i += PAGE) {
        if (p[i] != 0 || p[i + PAGE - 1] != 0) {
            fprintf(stderr, "round %u: a fresh segment holds a stale byte at %zu\n", round, i);
            return 1;
        }
    }
    memset(p, (int)(round % 255 + 1), bytes);
    for (size_t i = 0; i < bytes; i += PAGE / 2) {
        if (p[i] != (uint8_t)(round % 255 + 1)) {
            fprintf(stderr, "round %u: byte %zu lost\n", round, i);
            return 1;
        }
    }
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    return 0;
}

static int churn(sci_desc_t sd, size_t mib, unsigned int cycles)
{
    double start = now_ms();
    for (unsigned int round = 0; round < cycles; round++) {
        if (cycle(sd, mib * MIB, round) != 0) {
            return 1;
        }
    }
    printf("churn: %u cycles of %zu MiB segments, each zero when made and filled, in %.1f s\n",
           cycles, mib, (now_ms() - start) / 1e3);
    return 0;
}

static int big(sci_desc_t sd, size_t mib)
{
    sci_error_t err;
    sci_local_segment_t seg;
    sci_map_t map;
    size_t bytes = mib * MIB;
    double start = now_ms();
    SCICreateSegment(sd, &seg, 0, bytes, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    check("SCICreateSegment", err);
    double made = now_ms() - start;
    uint8_t *p = (uint8_t *)SCIMapLocalSegment(seg, &map, 0, bytes, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    if (p[0] != 0 || p[bytes - 1] != 0) {
        fprintf(stderr, "a fresh segment does not read as zeroes\n");
        return 1;
    }
    p[0] = 1;
    p[bytes - 1] = 2;
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment", err);
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    printf("big: a %zu MiB segment created in %.3f ms, both ends read zero (made, used and "
           "removed from %.3f to %.3f ms on the monotonic clock)\n",
           mib, made, start, now_ms());
    return 0;
}

static int probe(sci_desc_t sd, double seconds)
{
    (void)sd;
    sci_error_t err;
    unsigned int node;
    double end = now_ms() + seconds * 1e3, longest = 0, longest_at = 0, total = 0;
    unsigned long calls = 0;
    while (now_ms() < end) {
        double asked = now_ms();
        SCIGetLocalNodeId(0, &node, SCI_NO_FLAGS, &err);
        check("SCIGetLocalNodeId", err);
        double t = now_ms() - asked;
        if (t > longest) {
            longest = t;
            longest_at = asked;
        }
        total += t;
        calls++;
    }
    printf("probe: %lu daemon round trips, longest %.3f ms (asked at %.3f ms on the monotonic "
           "clock), mean %.1f us\n",
           calls, longest, longest_at, calls ? total * 1e3 / (double)calls : 0.0);
    return 0;
}

int main(int argc, char **argv)
{
    sci_error_t err;
    sci_desc_t sd;
    if (argc < 2) {
        fprintf(stderr, "usage: %s limits | churn MIB CYCLES | big MIB | probe SECONDS\n", argv[0]);
        return 2;
    }
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);
    int status = 2;
    if (strcmp(argv[1], "limits") == 0) {
        /* Closes its descriptor itself. */
        status = limits(sd);
        SCITerminate();
        return status;
    } else if (strcmp(argv[1], "churn") == 0 && argc == 4) {
        status = churn(sd, strtoul(argv[2], NULL, 0), (unsigned int)strtoul(argv[3], NULL, 0));
    } else if (strcmp(argv[1], "big") == 0 && argc == 3) {
        status = big(sd, strtoul(argv[2], NULL, 0));
    } else if (strcmp(argv[1], "probe") == 0 && argc == 3) {
        status = probe(sd, strtod(argv[2], NULL));
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
    }
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return status;
}
