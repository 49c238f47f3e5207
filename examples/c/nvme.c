/*
 * nvme.c -- an NVMe driven from user space through SISCI's SmartIO extension, the way
 * programs for Dolphin's SmartIO do it: find an NVMe by its class, borrow it, map its BAR,
 * let SmartIO place the queues (device segments with access hints), map a local segment for
 * the device's data transfers, reset and enable the controller, identify it and its first
 * namespace, create an I/O queue pair, write blocks and read them back.
 *
 *   nvme [blocks]      (run on the host that borrows; blocks: 4 KiB pages to move, 1-16)
 *
 * Built by smartio's test suite with -Wall -Werror against the installed headers, and run
 * on `smartio cluster up --scenario back-to-back` as a program of the borrower.
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Controller registers (NVMe 1.4 section 3.1). */
#define REG_CAP 0x00
#define REG_CC 0x14
#define REG_CSTS 0x1c
#define REG_AQA 0x24
#define REG_ASQ 0x28
#define REG_ACQ 0x30
#define DOORBELLS 0x1000

#define QUEUE_ENTRIES 64
#define PAGE 4096
#define MAX_PAGES 16

/* Layout of the local segment the device writes and reads. */
#define IDENTIFY_AT 0
#define WRITE_AT PAGE
#define READ_AT (PAGE + MAX_PAGES * PAGE)
#define LOCAL_SIZE (PAGE + 2 * MAX_PAGES * PAGE)

struct queue {
    volatile uint8_t *entries; /* as the program sees them */
    uint64_t ioaddr;           /* as the device sees them */
    uint16_t index;            /* SQ tail or CQ head */
    uint16_t phase;            /* CQ: the phase of new entries */
};

struct controller {
    volatile uint32_t *regs;
    uint32_t stride; /* doorbell stride in bytes */
    uint16_t next_cid;
};

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
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint32_t reg_read(struct controller *c, unsigned int offset)
{
    return c->regs[offset / 4];
}

static void reg_write(struct controller *c, unsigned int offset, uint32_t value)
{
    c->regs[offset / 4] = value;
    SCIFlush(NULL, SCI_NO_FLAGS);
}

/* Waits until CSTS.RDY is `ready`, or fails after the controller's timeout. */
static void await_ready(struct controller *c, int ready, double timeout)
{
    double deadline = now_s() + timeout;
    while ((int)(reg_read(c, REG_CSTS) & 1) != ready) {
        if (reg_read(c, REG_CSTS) & 2) {
            fprintf(stderr, "the controller reports a fatal status (CSTS.CFS)\n");
            exit(1);
        }
        if (now_s() > deadline) {
            fprintf(stderr, "CSTS.RDY did not become %d in %.1f s\n", ready, timeout);
            exit(1);
        }
    }
}

/* Submits a 64-byte command on (sq, qid) and waits for its completion on cq; returns the
 * completion's first dword. Fails on an error status. */
static uint32_t run(struct controller *c, struct queue *sq, struct queue *cq, uint16_t qid,
                    uint32_t *command, const char *what)
{
    uint16_t cid = c->next_cid++;
    command[0] = (command[0] & 0xffff) | ((uint32_t)cid << 16);
    memcpy((void *)(sq->entries + (size_t)sq->index * 64), command, 64);
    sq->index = (uint16_t)((sq->index + 1) % QUEUE_ENTRIES);
    SCIFlush(NULL, SCI_NO_FLAGS);
    reg_write(c, DOORBELLS + (2u * qid) * c->stride, sq->index);

    volatile uint32_t *cqe = (volatile uint32_t *)(cq->entries + (size_t)cq->index * 16);
    double deadline = now_s() + 10.0;
    while (((cqe[3] >> 16) & 1) != cq->phase) {
        if (now_s() > deadline) {
            fprintf(stderr, "%s: no completion in 10 s\n", what);
            exit(1);
        }
    }
    uint32_t dw0 = cqe[0], dw3 = cqe[3];
    cq->index = (uint16_t)((cq->index + 1) % QUEUE_ENTRIES);
    if (cq->index == 0) {
        cq->phase ^= 1;
    }
    reg_write(c, DOORBELLS + (2u * qid + 1) * c->stride, cq->index);
    uint16_t status = (uint16_t)(dw3 >> 17);
    if ((dw3 & 0xffff) != cid || status != 0) {
        fprintf(stderr, "%s: command %u completed as %u with status 0x%x\n", what, cid,
                dw3 & 0xffff, status);
        exit(1);
    }
    return dw0;
}

/* A device segment placed by SmartIO from access hints, mapped for the program and the
 * device. */
static struct queue device_queue(sci_smartio_device_t dev, unsigned int id, unsigned int hints,
                                 sci_remote_segment_t *seg, sci_map_t *map)
{
    sci_error_t err;
    struct queue q = { NULL, 0, 0, 1 };
    SCICreateDeviceSegment(dev, id, PAGE, SCI_MEMTYPE_PRIVATE, hints, SCI_NO_FLAGS, &err);
    check("SCICreateDeviceSegment", err);
    SCIConnectDeviceSegment(dev, seg, id, SCI_MEMTYPE_PRIVATE, NULL, NULL, SCI_NO_FLAGS, &err);
    check("SCIConnectDeviceSegment", err);
    q.entries = SCIMapRemoteSegment(*seg, map, 0, PAGE, NULL, SCI_NO_FLAGS, &err);
    check("SCIMapRemoteSegment (queue)", err);
    SCIMapRemoteSegmentForDevice(*seg, dev, &q.ioaddr, 0, PAGE, SCI_NO_FLAGS, &err);
    check("SCIMapRemoteSegmentForDevice", err);
    return q;
}

static void copy_string(char *to, const volatile uint8_t *from, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        to[i] = (char)from[i];
    }
    while (i > 0 && to[i - 1] == ' ') {
        i--;
    }
    to[i] = 0;
}

static uint8_t pattern(uint64_t lba, size_t i)
{
    return (uint8_t)(lba * 131 + i * 7 + (i >> 9));
}

int main(int argc, char **argv)
{
    unsigned int pages = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 0) : 8;
    if (pages < 1 || pages > MAX_PAGES) {
        fprintf(stderr, "blocks: 1 to %d pages\n", MAX_PAGES);
        return 2;
    }
    sci_error_t err;
    sci_desc_t sd;
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);

    /* An NVMe anywhere in the cluster. */
    sci_smartio_device_info_t filter;
    memset(&filter, 0, sizeof filter);
    filter.pci_class = 0x010802;
    uint32_t fdids[16];
    unsigned int found = SCIGetDeviceList(sd, fdids, 16, &filter, SCI_NO_FLAGS, &err);
    check("SCIGetDeviceList", err);
    if (found == 0) {
        fprintf(stderr, "no NVMe in the cluster\n");
        return 1;
    }
    sci_smartio_device_info_t info;
    sci_smartio_query_device_t query = { fdids[0], SCI_Q_DEVICE_INFO, &info };
    SCIQuery(SCI_Q_DEVICE, &query, SCI_NO_FLAGS, &err);
    check("SCIQuery(SCI_Q_DEVICE)", err);
    printf("NVMe fdid %u (%s) behind node %u, class %06x\n", info.fdid, info.user_name,
           info.nodeid, info.pci_class);

    sci_smartio_device_t dev;
    SCIBorrowDevice(sd, &dev, fdids[0], SCI_FLAG_EXCLUSIVE, &err);
    check("SCIBorrowDevice", err);

    /* BAR0: the controller's registers. */
    sci_remote_segment_t bar;
    sci_map_t bar_map;
    SCIConnectDeviceSegment(dev, &bar, 0, SCI_MEMTYPE_BAR, NULL, NULL, SCI_NO_FLAGS, &err);
    check("SCIConnectDeviceSegment (BAR0)", err);
    struct controller c;
    c.regs = (volatile uint32_t *)SCIMapRemoteSegment(bar, &bar_map, 0,
                                                      SCIGetRemoteSegmentSize(bar), NULL,
                                                      SCI_FLAG_IO_MAP_IOSPACE, &err);
    check("SCIMapRemoteSegment (BAR0)", err);
    uint64_t cap = (uint64_t)reg_read(&c, REG_CAP) | ((uint64_t)reg_read(&c, REG_CAP + 4) << 32);
    c.stride = 4u << ((cap >> 32) & 0xf);
    c.next_cid = 1;
    double timeout = (double)((cap >> 24) & 0xff) * 0.5 + 1.0;

    /* Queues where SmartIO places them: submission queues near the device, completion
     * queues near the CPU that reads them. */
    sci_remote_segment_t seg_asq, seg_acq, seg_iosq, seg_iocq;
    sci_map_t map_asq, map_acq, map_iosq, map_iocq;
    unsigned int sq_hints = SCI_MEMACCESS_DEVICE_READ | SCI_MEMACCESS_HOST_WRITE;
    unsigned int cq_hints = SCI_MEMACCESS_DEVICE_WRITE | SCI_MEMACCESS_HOST_READ;
    struct queue asq = device_queue(dev, 1, sq_hints, &seg_asq, &map_asq);
    struct queue acq = device_queue(dev, 2, cq_hints, &seg_acq, &map_acq);
    struct queue iosq = device_queue(dev, 3, sq_hints, &seg_iosq, &map_iosq);
    struct queue iocq = device_queue(dev, 4, cq_hints, &seg_iocq, &map_iocq);

    /* Data buffers: a segment of this host, mapped for the device. */
    sci_local_segment_t local;
    sci_map_t local_map;
    uint64_t local_io;
    SCICreateSegment(sd, &local, 0, LOCAL_SIZE, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    check("SCICreateSegment", err);
    SCIPrepareSegment(local, 0, SCI_NO_FLAGS, &err);
    check("SCIPrepareSegment", err);
    SCISetSegmentAvailable(local, 0, SCI_NO_FLAGS, &err);
    check("SCISetSegmentAvailable", err);
    volatile uint8_t *buf = SCIMapLocalSegment(local, &local_map, 0, LOCAL_SIZE, NULL,
                                               SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegment", err);
    SCIMapLocalSegmentForDevice(local, 0, dev, &local_io, 0, LOCAL_SIZE, SCI_NO_FLAGS, &err);
    check("SCIMapLocalSegmentForDevice", err);

    /* Reset, then enable with the admin queues. */
    reg_write(&c, REG_CC, 0);
    await_ready(&c, 0, timeout);
    reg_write(&c, REG_AQA, ((QUEUE_ENTRIES - 1) << 16) | (QUEUE_ENTRIES - 1));
    reg_write(&c, REG_ASQ, (uint32_t)asq.ioaddr);
    reg_write(&c, REG_ASQ + 4, (uint32_t)(asq.ioaddr >> 32));
    reg_write(&c, REG_ACQ, (uint32_t)acq.ioaddr);
    reg_write(&c, REG_ACQ + 4, (uint32_t)(acq.ioaddr >> 32));
    reg_write(&c, REG_CC, 1 | (6u << 16) | (4u << 20));
    await_ready(&c, 1, timeout);
    printf("controller reset and enabled\n");

    uint32_t cmd[16];
    /* Identify Controller. */
    memset(cmd, 0, sizeof cmd);
    cmd[0] = 0x06;
    cmd[6] = (uint32_t)(local_io + IDENTIFY_AT);
    cmd[7] = (uint32_t)((local_io + IDENTIFY_AT) >> 32);
    cmd[10] = 1;
    run(&c, &asq, &acq, 0, cmd, "Identify Controller");
    char serial[21], model[41], firmware[9];
    copy_string(serial, buf + IDENTIFY_AT + 4, 20);
    copy_string(model, buf + IDENTIFY_AT + 24, 40);
    copy_string(firmware, buf + IDENTIFY_AT + 64, 8);
    uint16_t vendor = (uint16_t)(buf[IDENTIFY_AT] | (buf[IDENTIFY_AT + 1] << 8));
    printf("identify controller: vendor %04x, model \"%s\", serial \"%s\", firmware \"%s\"\n",
           vendor, model, serial, firmware);
    if (model[0] == 0 || vendor == 0) {
        fprintf(stderr, "an empty identify controller page\n");
        return 1;
    }

    /* Identify Namespace 1. */
    memset(cmd, 0, sizeof cmd);
    cmd[0] = 0x06;
    cmd[1] = 1;
    cmd[6] = (uint32_t)(local_io + IDENTIFY_AT);
    cmd[7] = (uint32_t)((local_io + IDENTIFY_AT) >> 32);
    cmd[10] = 0;
    run(&c, &asq, &acq, 0, cmd, "Identify Namespace");
    uint64_t nsze = 0;
    for (int i = 7; i >= 0; i--) {
        nsze = (nsze << 8) | buf[IDENTIFY_AT + i];
    }
    unsigned int format = buf[IDENTIFY_AT + 26] & 0xf;
    unsigned int lbads = buf[IDENTIFY_AT + 128 + 4 * format + 2];
    uint32_t block = 1u << lbads;
    printf("identify namespace 1: %llu blocks of %u bytes\n", (unsigned long long)nsze, block);
    if (nsze == 0 || block > PAGE) {
        fprintf(stderr, "an unusable namespace\n");
        return 1;
    }

    /* One I/O queue pair, polled (no interrupts). */
    memset(cmd, 0, sizeof cmd);
    cmd[0] = 0x05;
    cmd[6] = (uint32_t)iocq.ioaddr;
    cmd[7] = (uint32_t)(iocq.ioaddr >> 32);
    cmd[10] = ((QUEUE_ENTRIES - 1) << 16) | 1;
    cmd[11] = 1;
    run(&c, &asq, &acq, 0, cmd, "Create I/O Completion Queue");
    memset(cmd, 0, sizeof cmd);
    cmd[0] = 0x01;
    cmd[6] = (uint32_t)iosq.ioaddr;
    cmd[7] = (uint32_t)(iosq.ioaddr >> 32);
    cmd[10] = ((QUEUE_ENTRIES - 1) << 16) | 1;
    cmd[11] = (1u << 16) | 1;
    run(&c, &asq, &acq, 0, cmd, "Create I/O Submission Queue");

    /* Write `pages` pages, one command each, then read them back with one command of two
     * pages at a time where it can (PRP1 and PRP2). */
    uint32_t per_page = PAGE / block;
    uint64_t first = nsze / 2 - (nsze / 2) % per_page;
    for (unsigned int p = 0; p < pages; p++) {
        uint64_t lba = first + (uint64_t)p * per_page;
        for (size_t i = 0; i < PAGE; i++) {
            buf[WRITE_AT + (size_t)p * PAGE + i] = pattern(lba, i);
        }
        uint64_t at = local_io + WRITE_AT + (uint64_t)p * PAGE;
        memset(cmd, 0, sizeof cmd);
        cmd[0] = 0x01;
        cmd[1] = 1;
        cmd[6] = (uint32_t)at;
        cmd[7] = (uint32_t)(at >> 32);
        cmd[10] = (uint32_t)lba;
        cmd[11] = (uint32_t)(lba >> 32);
        cmd[12] = per_page - 1;
        run(&c, &iosq, &iocq, 1, cmd, "Write");
    }
    for (unsigned int p = 0; p < pages; p += 2) {
        unsigned int n = p + 1 < pages ? 2 : 1;
        uint64_t lba = first + (uint64_t)p * per_page;
        uint64_t at = local_io + READ_AT + (uint64_t)p * PAGE;
        memset(cmd, 0, sizeof cmd);
        cmd[0] = 0x02;
        cmd[1] = 1;
        cmd[6] = (uint32_t)at;
        cmd[7] = (uint32_t)(at >> 32);
        if (n == 2) {
            cmd[8] = (uint32_t)(at + PAGE);
            cmd[9] = (uint32_t)((at + PAGE) >> 32);
        }
        cmd[10] = (uint32_t)lba;
        cmd[11] = (uint32_t)(lba >> 32);
        cmd[12] = n * per_page - 1;
        run(&c, &iosq, &iocq, 1, cmd, "Read");
    }
    size_t bad = 0;
    for (unsigned int p = 0; p < pages; p++) {
        uint64_t lba = first + (uint64_t)p * per_page;
        for (size_t i = 0; i < PAGE; i++) {
            bad += buf[READ_AT + (size_t)p * PAGE + i] != pattern(lba, i);
        }
    }
    if (bad != 0) {
        fprintf(stderr, "%zu bytes read back differ from what was written\n", bad);
        return 1;
    }
    printf("wrote and read back %u blocks at LBA %llu: every byte matches\n", pages * per_page,
           (unsigned long long)first);

    /* Tear down: the I/O queues, the controller, then every map, segment and the device. */
    memset(cmd, 0, sizeof cmd);
    cmd[0] = 0x00;
    cmd[10] = 1;
    run(&c, &asq, &acq, 0, cmd, "Delete I/O Submission Queue");
    memset(cmd, 0, sizeof cmd);
    cmd[0] = 0x04;
    cmd[10] = 1;
    run(&c, &asq, &acq, 0, cmd, "Delete I/O Completion Queue");
    reg_write(&c, REG_CC, 0);
    await_ready(&c, 0, timeout);

    SCIUnmapLocalSegmentForDevice(local, 0, dev, SCI_NO_FLAGS, &err);
    check("SCIUnmapLocalSegmentForDevice", err);
    SCIUnmapSegment(local_map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment (local)", err);
    sci_remote_segment_t segs[4] = { seg_asq, seg_acq, seg_iosq, seg_iocq };
    sci_map_t maps[4] = { map_asq, map_acq, map_iosq, map_iocq };
    for (int i = 0; i < 4; i++) {
        SCIUnmapRemoteSegmentForDevice(segs[i], dev, SCI_NO_FLAGS, &err);
        check("SCIUnmapRemoteSegmentForDevice", err);
        SCIUnmapSegment(maps[i], SCI_NO_FLAGS, &err);
        check("SCIUnmapSegment (queue)", err);
        SCIDisconnectSegment(segs[i], SCI_NO_FLAGS, &err);
        check("SCIDisconnectSegment (queue)", err);
    }
    SCIUnmapSegment(bar_map, SCI_NO_FLAGS, &err);
    check("SCIUnmapSegment (BAR0)", err);
    SCIDisconnectSegment(bar, SCI_NO_FLAGS, &err);
    check("SCIDisconnectSegment (BAR0)", err);
    SCIReturnDevice(dev, SCI_NO_FLAGS, &err);
    check("SCIReturnDevice", err);
    SCIRemoveSegment(local, SCI_NO_FLAGS, &err);
    check("SCIRemoveSegment", err);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return 0;
}
