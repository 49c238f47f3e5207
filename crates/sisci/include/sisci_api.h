/*
 * sisci_api.h -- smartio's SISCI library: the calls.
 *
 * Written for smartio (MIT OR Apache-2.0) to be source compatible with programs for the
 * public SISCI API. The library talks to a cluster daemon (`smartio cluster up`); a program
 * says which emulated host it runs on in SMARTIO_HOST and finds the daemon at
 * SMARTIO_SOCKET (default /tmp/smartio-cluster.sock). docs/sisci.md lists what is supported
 * and what each unsupported call returns.
 *
 * Unless noted, a call reports its outcome in *error (SCI_ERR_OK on success).
 */
#ifndef SMARTIO_SISCI_API_H
#define SMARTIO_SISCI_API_H

#include "sisci_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library */
void SCIInitialize(unsigned int flags, sci_error_t *error);
void SCITerminate(void);
void SCIOpen(sci_desc_t *sd, unsigned int flags, sci_error_t *error);
void SCIClose(sci_desc_t sd, unsigned int flags, sci_error_t *error);
const char *SCIGetErrorString(sci_error_t error);
void SCIGetLocalNodeId(unsigned int adapterNo, unsigned int *nodeId, unsigned int flags,
                       sci_error_t *error);
void SCIQuery(unsigned int command, void *data, unsigned int flags, sci_error_t *error);
/* The node ids of an adapter name: a host's name (its adapters, in order) or one adapter's
 * (host.ntb0); a name nothing has gives a list of zeroes. */
void SCIGetNodeIdByAdapterName(char *adaptername, dis_nodeId_list_t *nodeId,
                               dis_virt_adapter_t *type, unsigned int flags, sci_error_t *error);
/* 1 if the local adapter reaches the node now; 0, with the reason in *error, if not. */
int SCIProbeNode(sci_desc_t sd, unsigned int localAdapterNo, unsigned int nodeId,
                 unsigned int flags, sci_error_t *error);

/* Local segments */
void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                      size_t size, sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error);
void SCIPrepareSegment(sci_local_segment_t segment, unsigned int adapterNo, unsigned int flags,
                       sci_error_t *error);
void SCISetSegmentAvailable(sci_local_segment_t segment, unsigned int adapterNo,
                            unsigned int flags, sci_error_t *error);
void SCISetSegmentUnavailable(sci_local_segment_t segment, unsigned int adapterNo,
                              unsigned int flags, sci_error_t *error);
void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error);
void SCIRegisterSegmentMemory(void *address, size_t size, sci_local_segment_t segment,
                              unsigned int flags, sci_error_t *error);
void SCIAttachPhysicalMemory(sci_ioaddr_t ioaddress, void *address, unsigned int busNo,
                             size_t size, sci_local_segment_t segment, unsigned int flags,
                             sci_error_t *error);
/* Not provided on the live engine: SCI_ERR_NOT_IMPLEMENTED. */
void SCIShareSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error);
void SCIAttachLocalSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                           size_t *size, sci_cb_local_segment_t callback, void *callbackArg,
                           unsigned int flags, sci_error_t *error);
unsigned int SCIGetLocalSegmentId(sci_local_segment_t segment);
size_t SCIGetLocalSegmentSize(sci_local_segment_t segment);

/* Remote segments */
void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment, unsigned int nodeId,
                       unsigned int segmentId, unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg,
                       unsigned int timeout, unsigned int flags, sci_error_t *error);
void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags, sci_error_t *error);
size_t SCIGetRemoteSegmentSize(sci_remote_segment_t segment);
/* Segment events: CONNECT / DISCONNECT on a local segment (nodeId: the other side, even when
 * its program died), LOST on a connection whose owner left. 0 on failure. */
sci_segment_cb_reason_t SCIWaitForLocalSegmentEvent(sci_local_segment_t segment,
                                                    unsigned int *sourcenodeId,
                                                    unsigned int *localAdapterNo,
                                                    unsigned int timeout, unsigned int flags,
                                                    sci_error_t *error);
sci_segment_cb_reason_t SCIWaitForRemoteSegmentEvent(sci_remote_segment_t segment,
                                                     sci_error_t *status, unsigned int timeout,
                                                     unsigned int flags, sci_error_t *error);
unsigned int SCIGetRemoteSegmentNodeId(sci_remote_segment_t segment);
unsigned int SCIGetRemoteSegmentId(sci_remote_segment_t segment);

/* Maps */
void *SCIMapLocalSegment(sci_local_segment_t segment, sci_map_t *map, size_t offset,
                         size_t size, void *addr, unsigned int flags, sci_error_t *error);
volatile void *SCIMapRemoteSegment(sci_remote_segment_t segment, sci_map_t *map, size_t offset,
                                   size_t size, void *addr, unsigned int flags,
                                   sci_error_t *error);
void SCIUnmapSegment(sci_map_t map, unsigned int flags, sci_error_t *error);

/* Sequences and flushing */
void SCICreateMapSequence(sci_map_t map, sci_sequence_t *sequence, unsigned int flags,
                          sci_error_t *error);
sci_sequence_status_t SCIStartSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error);
sci_sequence_status_t SCICheckSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error);
void SCIRemoveSequence(sci_sequence_t sequence, unsigned int flags, sci_error_t *error);
void SCIFlush(sci_sequence_t sequence, unsigned int flags);
/* Orders the program's stores before what follows; on a sequence of a broadcast map, returns
 * once they have reached every member of the group. */
void SCIStoreBarrier(sci_sequence_t sequence, unsigned int flags);
void SCIMemWrite(void *memAddr, volatile void *remoteAddr, size_t size, unsigned int flags,
                 sci_error_t *error);
void SCIMemCpy(sci_sequence_t sequence, void *memAddr, sci_map_t remoteMap,
               size_t remoteOffset, size_t size, unsigned int flags, sci_error_t *error);
void SCICacheSync(sci_map_t map, void *addr, size_t size, unsigned int flags,
                  sci_error_t *error);

/* DMA queues: the adapter's DMA engine moves bytes between a local segment (prepared on
 * the queue's adapter) and a segment connected through that adapter. */
void SCICreateDMAQueue(sci_desc_t sd, sci_dma_queue_t *dq, unsigned int localAdapterNo,
                       unsigned int maxEntries, unsigned int flags, sci_error_t *error);
void SCIRemoveDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error);
void SCIAbortDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error);
sci_dma_queue_state_t SCIDMAQueueState(sci_dma_queue_t dq);
sci_dma_queue_state_t SCIWaitForDMAQueue(sci_dma_queue_t dq, unsigned int timeout,
                                         unsigned int flags, sci_error_t *error);
void SCIStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment, size_t localOffset, size_t size,
                         size_t remoteOffset, sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error);
void SCIStartDmaTransferVec(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment, size_t vecLength,
                            dis_dma_vec_t *disDmaVec, sci_cb_dma_t callback,
                            void *callbackArg, unsigned int flags, sci_error_t *error);
void SCIStartDmaTransferMem(sci_dma_queue_t dq, void *localAddress,
                            sci_remote_segment_t remoteSegment, size_t size,
                            size_t remoteOffset, sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);

/* Data interrupts */
void SCICreateDataInterrupt(sci_desc_t sd, sci_local_data_interrupt_t *interrupt,
                            unsigned int localAdapterNo, unsigned int *interruptNo,
                            sci_cb_data_interrupt_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);
void SCIRemoveDataInterrupt(sci_local_data_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error);
void SCIWaitForDataInterrupt(sci_local_data_interrupt_t interrupt, void *data,
                             unsigned int *length, unsigned int timeout, unsigned int flags,
                             sci_error_t *error);
void SCIConnectDataInterrupt(sci_desc_t sd, sci_remote_data_interrupt_t *interrupt,
                             unsigned int nodeId, unsigned int localAdapterNo,
                             unsigned int interruptNo, unsigned int timeout, unsigned int flags,
                             sci_error_t *error);
void SCIDisconnectDataInterrupt(sci_remote_data_interrupt_t interrupt, unsigned int flags,
                                sci_error_t *error);
void SCITriggerDataInterrupt(sci_remote_data_interrupt_t interrupt, void *data,
                             unsigned int length, unsigned int flags, sci_error_t *error);

/* Interrupts without data */
void SCICreateInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                        unsigned int localAdapterNo, unsigned int *interruptNo,
                        sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                        sci_error_t *error);
void SCIRemoveInterrupt(sci_local_interrupt_t interrupt, unsigned int flags, sci_error_t *error);
void SCIWaitForInterrupt(sci_local_interrupt_t interrupt, unsigned int timeout,
                         unsigned int flags, sci_error_t *error);
void SCIConnectInterrupt(sci_desc_t sd, sci_remote_interrupt_t *interrupt, unsigned int nodeId,
                         unsigned int localAdapterNo, unsigned int interruptNo,
                         unsigned int timeout, unsigned int flags, sci_error_t *error);
void SCIDisconnectInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error);
void SCITriggerInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                         sci_error_t *error);

/* SmartIO: devices */
unsigned int SCIGetDeviceList(sci_desc_t sd, uint32_t *fdids, unsigned int length,
                              const sci_smartio_device_info_t *filter, unsigned int flags,
                              sci_error_t *error);
void SCIBorrowDevice(sci_desc_t sd, sci_smartio_device_t *device, uint32_t fdid,
                     unsigned int flags, sci_error_t *error);
void SCIReturnDevice(sci_smartio_device_t device, unsigned int flags, sci_error_t *error);
uint32_t SCIGetFabricDeviceId(sci_smartio_device_t device);
void SCICreateDeviceSegment(sci_smartio_device_t device, unsigned int segmentId, size_t size,
                            unsigned int memtype, unsigned int hints, unsigned int flags,
                            sci_error_t *error);
void SCIConnectDeviceSegment(sci_smartio_device_t device, sci_remote_segment_t *segment,
                             unsigned int segmentId, unsigned int memtype,
                             sci_cb_remote_segment_t callback, void *callbackArg,
                             unsigned int flags, sci_error_t *error);
void SCIMapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int adapterNo,
                                 sci_smartio_device_t device, sci_ioaddr_t *address,
                                 size_t offset, size_t size, unsigned int flags,
                                 sci_error_t *error);
void SCIUnmapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int adapterNo,
                                   sci_smartio_device_t device, unsigned int flags,
                                   sci_error_t *error);
void SCIMapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_smartio_device_t device,
                                  sci_ioaddr_t *address, size_t offset, size_t size,
                                  unsigned int flags, sci_error_t *error);
void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_smartio_device_t device,
                                    unsigned int flags, sci_error_t *error);
void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int adapterNo, unsigned int bus,
                              unsigned int devfn, unsigned int flags, sci_error_t *error);
void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int adapterNo, unsigned int bus,
                                unsigned int devfn, unsigned int flags, sci_error_t *error);

#ifdef __cplusplus
}
#endif

#endif
