/*
 * watched.c -- something for the live web view to show: borrows a device, creates a segment
 * on this host, makes it available on adapter 0 and maps it for the device, says "done",
 * then holds all of it until its standard input closes, and gives it back.
 *
 *   watched FDID
 *
 * Run by crates/cli/tests/web.rs (built with -Wall -Werror against the installed headers).
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdio.h>
#include <stdlib.h>

#define SEGMENT_ID 42
#define SEGMENT_SIZE 65536

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    sci_error_t err;
    sci_desc_t sd;
    if (argc != 2) {
        fprintf(stderr, "usage: %s FDID\n", argv[0]);
        return 2;
    }
    unsigned int fdid = (unsigned int)strtoul(argv[1], NULL, 0);
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);

    sci_smartio_device_t dev;
    SCIBorrowDevice(sd, &dev, fdid, SCI_NO_FLAGS, &err);
    check("SCIBorrowDevice", err);
    sci_local_segment_t seg;
    SCICreateSegment(sd, &seg, SEGMENT_ID, SEGMENT_SIZE, NULL, NULL, SCI_NO_FLAGS, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(seg, 0, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(seg, 0, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    sci_ioaddr_t addr;
    SCIMapLocalSegmentForDevice(seg, 0, dev, &addr, 0, SEGMENT_SIZE, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegmentForDevice", err);
    printf("watched: fdid %u borrowed, segment %d mapped for it: done\n", fdid, SEGMENT_ID);
    fflush(stdout);

    while (getchar() != EOF) {
    }

    SCIUnmapLocalSegmentForDevice(seg, 0, dev, SCI_NO_FLAGS, &err);
    check("SCIUnmapLocalSegmentForDevice", err);
    SCIReturnDevice(dev, SCI_NO_FLAGS, &err);
    check("SCIReturnDevice", err);
    SCISetSegmentUnavailable(seg, 0, SCI_NO_FLAGS, &err);
    check("SCISetSegmentUnavailable", err);
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    printf("watched: everything given back\n");
    return 0;
}
