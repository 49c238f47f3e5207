/*
 * requesters.c -- requester-id limits seen from C. Every device that reaches another
 * host's memory through an NTB needs its requester id in that adapter's table (32 entries,
 * two of them the host CPU's). A program that maps memory for more devices than the table
 * holds must get SCI_ERR_HW_NOSPC, never a crash; so must one that registers more of its
 * host's functions as PCIe requesters.
 *
 *   requesters borrow [hold]   borrow every DMA engine, map a local segment for each until
 *                              the lender's table is full; with "hold", keep them (to be
 *                              killed), else give everything back and map once more
 *   requesters register        register this host's functions by bus/devfn until the table
 *                              is full, then unregister them
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

#define MAX_DEVICES 64

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

static int borrow(sci_desc_t sd, int hold)
{
    sci_error_t err;
    sci_smartio_device_info_t filter;
    memset(&filter, 0, sizeof filter);
    filter.pci_class = 0x088000;
    uint32_t fdids[MAX_DEVICES];
    unsigned int n = SCIGetDeviceList(sd, fdids, MAX_DEVICES, &filter, SCI_NO_FLAGS, &err);
    check("SCIGetDeviceList", err);

    sci_local_segment_t seg;
    SCICreateSegment(sd, &seg, 0, 65536, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(seg, 0, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(seg, 0, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);

    sci_smartio_device_t devs[MAX_DEVICES];
    unsigned int mapped = 0;
    sci_error_t last = SCI_ERR_OK;
    for (unsigned int i = 0; i < n; i++) {
        SCIBorrowDevice(sd, &devs[i], fdids[i], SCI_NO_FLAGS, &err);
        check("SCIBorrowDevice", err);
        sci_ioaddr_t addr;
        SCIMapLocalSegmentForDevice(seg, 0, devs[i], &addr, 0, 65536, SCI_NO_FLAGS, &last);
        if (last != SCI_ERR_OK) {
            SCIReturnDevice(devs[i], SCI_NO_FLAGS, &err);
            check("SCIReturnDevice", err);
            break;
        }
        mapped++;
    }
    printf("%u of %u devices mapped, then %s\n", mapped, n,
           last == SCI_ERR_HW_NOSPC ? "SCI_ERR_HW_NOSPC" : "no error");
    fflush(stdout);
    if (last != SCI_ERR_HW_NOSPC) {
        return 1;
    }
    /* Held (shared) by this program: nobody may have it exclusively now. */
    if (mapped > 0) {
        sci_smartio_device_t excl;
        SCIBorrowDevice(sd, &excl, fdids[0], SCI_FLAG_EXCLUSIVE, &err);
        printf("an exclusive borrow of a held device: %s\n",
               err == SCI_ERR_NOT_AVAILABLE ? "SCI_ERR_NOT_AVAILABLE" : SCIGetErrorString(err));
        if (err != SCI_ERR_NOT_AVAILABLE) {
            return 1;
        }
    }
    if (hold) {
        printf("holding\n");
        fflush(stdout);
        for (;;) {
            pause();
        }
    }
    for (unsigned int i = 0; i < mapped; i++) {
        SCIUnmapLocalSegmentForDevice(seg, 0, devs[i], SCI_NO_FLAGS, &err);
        check("SCIUnmapLocalSegmentForDevice", err);
        SCIReturnDevice(devs[i], SCI_NO_FLAGS, &err);
        check("SCIReturnDevice", err);
    }
    /* Every entry is back: the device that did not fit fits now. */
    sci_smartio_device_t last_dev;
    sci_ioaddr_t addr;
    SCIBorrowDevice(sd, &last_dev, fdids[mapped], SCI_NO_FLAGS, &err);
    check("SCIBorrowDevice", err);
    SCIMapLocalSegmentForDevice(seg, 0, last_dev, &addr, 0, 65536, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegmentForDevice after returning the others", err);
    SCIUnmapLocalSegmentForDevice(seg, 0, last_dev, SCI_NO_FLAGS, &err);
    check("SCIUnmapLocalSegmentForDevice", err);
    SCIReturnDevice(last_dev, SCI_NO_FLAGS, &err);
    check("SCIReturnDevice", err);
    SCIRemoveSegment(seg, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    printf("every device returned\n");
    return 0;
}

static int register_all(sci_desc_t sd)
{
    static unsigned int registered[4096][2];
    unsigned int n = 0;
    sci_error_t err = SCI_ERR_OK;
    for (unsigned int bus = 0; bus < 256 && err != SCI_ERR_HW_NOSPC; bus++) {
        for (unsigned int devfn = 0; devfn < 256; devfn++) {
            SCIRegisterPCIeRequester(sd, 0, bus, devfn, SCI_NO_FLAGS, &err);
            if (err == SCI_ERR_OK) {
                registered[n][0] = bus;
                registered[n][1] = devfn;
                n++;
            } else if (err == SCI_ERR_HW_NOSPC) {
                break;
            } else if (err != SCI_ERR_ILLEGAL_PARAMETER) {
                fprintf(stderr, "bus %u devfn %u: 0x%x\n", bus, devfn, (unsigned)err);
                return 1;
            }
        }
    }
    printf("%u requesters registered, then %s\n", n,
           err == SCI_ERR_HW_NOSPC ? "SCI_ERR_HW_NOSPC" : "no error");
    for (unsigned int i = 0; i < n; i++) {
        SCIUnregisterPCIeRequester(sd, 0, registered[i][0], registered[i][1], SCI_NO_FLAGS, &err);
        check("SCIUnregisterPCIeRequester", err);
    }
    return err == SCI_ERR_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    sci_error_t err;
    sci_desc_t sd;
    if (argc < 2) {
        fprintf(stderr, "usage: %s borrow [hold] | register\n", argv[0]);
        return 2;
    }
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);
    int rc = strcmp(argv[1], "register") == 0 ? register_all(sd)
                                              : borrow(sd, argc > 2 && strcmp(argv[2], "hold") == 0);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return rc;
}
