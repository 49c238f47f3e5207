/*
 * sisci_types.h -- smartio's SISCI library: handles, flags, callbacks and query records.
 *
 * Written for smartio (MIT OR Apache-2.0) to be source compatible with programs for the
 * public SISCI API. Handles are opaque pointers. Flags are named as SISCI names them; a
 * flag's meaning belongs to the call it is passed to, so values repeat across calls.
 */
#ifndef SMARTIO_SISCI_TYPES_H
#define SMARTIO_SISCI_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "sisci_error.h"
#include "dis_types.h"

typedef struct sci_desc *sci_desc_t;
typedef struct sci_local_segment *sci_local_segment_t;
typedef struct sci_remote_segment *sci_remote_segment_t;
typedef struct sci_map *sci_map_t;
typedef struct sci_sequence *sci_sequence_t;
typedef struct sci_local_interrupt *sci_local_interrupt_t;
typedef struct sci_remote_interrupt *sci_remote_interrupt_t;
typedef struct sci_local_data_interrupt *sci_local_data_interrupt_t;
typedef struct sci_remote_data_interrupt *sci_remote_data_interrupt_t;
typedef struct sci_smartio_device *sci_smartio_device_t;
typedef struct sci_dma_queue *sci_dma_queue_t;

/* An address as a device or adapter puts it on the bus. */
typedef uint64_t sci_ioaddr_t;

/* Wait for ever (any timeout argument, in milliseconds). */
#define SCI_INFINITE_TIMEOUT 0xffffffffU

/* Not a SISCI name, but defined by most SISCI programs; harmless to have. */
#ifndef SCI_NO_FLAGS
#define SCI_NO_FLAGS 0
#endif

/* Flags of segment and interrupt calls. */
#define SCI_FLAG_USE_CALLBACK   0x1U
#define SCI_FLAG_FIXED_INTNO    0x2U
#define SCI_FLAG_EMPTY          0x2U
#define SCI_FLAG_PRIVATE        0x4U
#define SCI_FLAG_AUTO_ID        0x20000000U
#define SCI_FLAG_FIXED_MAP_ADDR 0x1U
#define SCI_FLAG_READONLY_MAP   0x2U
#define SCI_FLAG_IO_MAP_IOSPACE 0x80U
#define SCI_FLAG_LOCK_USER_MEM  0x400U
#define SCI_FLAG_BROADCAST      0x40000U
#define SCI_FLAG_CACHE_FLUSH      0x100000U
#define SCI_FLAG_CACHE_INVALIDATE 0x200000U

/* What a callback asks for: keep it (CONTINUE) or stop calling it (CANCEL). */
typedef enum {
    SCI_CALLBACK_CANCEL = 1,
    SCI_CALLBACK_CONTINUE = 2
} sci_callback_action_t;

/* Why a segment callback was called. */
typedef enum {
    SCI_CB_CONNECT = 1,
    SCI_CB_DISCONNECT = 2,
    SCI_CB_NOT_OPERATIONAL = 3,
    SCI_CB_OPERATIONAL = 4,
    SCI_CB_LOST = 5
} sci_segment_cb_reason_t;

/* What a sequence saw. */
typedef enum {
    SCI_SEQ_OK = 0,
    SCI_SEQ_RETRIABLE = 1,
    SCI_SEQ_NOT_RETRIABLE = 2,
    SCI_SEQ_PENDING = 3
} sci_sequence_status_t;

typedef sci_callback_action_t (*sci_cb_local_segment_t)(void *arg, sci_local_segment_t segment,
                                                        sci_segment_cb_reason_t reason,
                                                        unsigned int nodeId,
                                                        unsigned int localAdapterNo,
                                                        sci_error_t error);
typedef sci_callback_action_t (*sci_cb_remote_segment_t)(void *arg, sci_remote_segment_t segment,
                                                         sci_segment_cb_reason_t reason,
                                                         sci_error_t error);
typedef sci_callback_action_t (*sci_cb_interrupt_t)(void *arg, sci_local_interrupt_t interrupt,
                                                    sci_error_t error);
typedef sci_callback_action_t (*sci_cb_dma_t)(void *arg, sci_dma_queue_t queue,
                                              sci_error_t status);
typedef sci_callback_action_t (*sci_cb_data_interrupt_t)(void *arg,
                                                         sci_local_data_interrupt_t interrupt,
                                                         void *data, unsigned int length,
                                                         sci_error_t error);

/* DMA queues: what a queue reports (SCIDMAQueueState, SCIWaitForDMAQueue). GATHER is never
 * reported here: transfers are posted as they are started. */
typedef enum {
    SCI_DMAQUEUE_IDLE,
    SCI_DMAQUEUE_GATHER,
    SCI_DMAQUEUE_POSTED,
    SCI_DMAQUEUE_DONE,
    SCI_DMAQUEUE_ABORTED,
    SCI_DMAQUEUE_ERROR
} sci_dma_queue_state_t;

/* One transfer of SCIStartDmaTransferVec: bytes, where they start in the local and the
 * remote segment, and SCI_FLAG_DMA_READ or 0. */
typedef struct {
    size_t size;
    size_t local_offset;
    size_t remote_offset;
    unsigned int flags;
} dis_dma_vec_t;

/* The most entries of one vector. */
#define DIS_DMA_MAX_VECLEN 256

/* Flags of DMA calls. SCI_FLAG_DMA_GLOBAL and SCI_FLAG_DMA_ADAPTER are taken (the
 * adapter's engine runs every transfer); SOURCE_ONLY, PHDMA, SYSDMA and USER_MEM are
 * refused with SCI_ERR_ILLEGAL_FLAG. */
#define SCI_FLAG_DMA_WAIT        0x4U
#define SCI_FLAG_DMA_SOURCE_ONLY 0x8U
#define SCI_FLAG_DMA_READ        0x10U
#define SCI_FLAG_DMA_PHDMA       0x20U
#define SCI_FLAG_DMA_GLOBAL      0x40U
#define SCI_FLAG_DMA_SYSDMA      0x100U
#define SCI_FLAG_DMA_USER_MEM    0x200U
#define SCI_FLAG_DMA_ADAPTER     0x800U

/* SmartIO: borrowing devices and their segments. */
#define SCI_FLAG_EXCLUSIVE             0x01000000U
#define SCI_FLAG_PCIE_REQUESTER_GLOBAL 0x1U

/* Kinds of device segment: a BAR (its number is the segment id), memory for one borrower,
 * memory every borrower of the device may connect to. */
#define SCI_MEMTYPE_BAR     1U
#define SCI_MEMTYPE_PRIVATE 2U
#define SCI_MEMTYPE_SHARED  4U

/* Who will access a device segment, so SmartIO can place it well. */
#define SCI_MEMACCESS_DEVICE_READ     0x01U
#define SCI_MEMACCESS_DEVICE_WRITE    0x02U
#define SCI_MEMACCESS_HOST_READ       0x04U
#define SCI_MEMACCESS_HOST_WRITE      0x08U
#define SCI_MEMACCESS_MULTIHOST_READ  (0x10U | SCI_MEMACCESS_HOST_READ)
#define SCI_MEMACCESS_MULTIHOST_WRITE (0x10U | SCI_MEMACCESS_HOST_WRITE)
#define SCI_MEMACCESS_P2P_READ        (0x20U | SCI_MEMACCESS_DEVICE_READ)
#define SCI_MEMACCESS_P2P_WRITE       (0x20U | SCI_MEMACCESS_DEVICE_WRITE)

/* A device SmartIO lends; as a filter for SCIGetDeviceList, fields left 0 match any. */
typedef struct {
    uint32_t fdid;
    unsigned int adapter;
    unsigned int nodeid;
    uint32_t pci_class;
    uint16_t pci_vendor_id;
    uint16_t pci_device_id;
    char user_name[64];
} sci_smartio_device_info_t;

typedef struct {
    uint32_t fdid;
    unsigned int subcommand;
    void *data;
} sci_smartio_query_device_t;

/* SCIQuery commands and subcommands (smartio's numbers). */
#define SCI_Q_ADAPTER 1U
#define SCI_Q_LOCAL_SEGMENT 2U
#define SCI_Q_REMOTE_SEGMENT 3U
#define SCI_Q_DEVICE 4U
#define SCI_Q_ADAPTER_NODEID 0x101U
#define SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT 0x102U
#define SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT 0x103U
#define SCI_Q_ADAPTER_DMA_MTU 0x104U
#define SCI_Q_LOCAL_SEGMENT_IOADDR 0x201U
#define SCI_Q_LOCAL_SEGMENT_PHYS_ADDR 0x202U
#define SCI_Q_DEVICE_INFO 0x401U

typedef struct {
    unsigned int localAdapterNo;
    unsigned int portNo;
    unsigned int subcommand;
    void *data;
} sci_query_adapter_t;

typedef struct {
    sci_local_segment_t segment;
    unsigned int subcommand;
    union {
        sci_ioaddr_t ioaddr;
    } data;
} sci_query_local_segment_t;

#endif
