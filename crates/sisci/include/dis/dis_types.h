/*
 * dis_types.h -- smartio's SISCI library: fabric-wide constants.
 *
 * Written for smartio (MIT OR Apache-2.0). Programs do not include this file themselves;
 * sisci_types.h does. It lives under include/dis because SISCI programs add both
 * PREFIX/include and PREFIX/include/dis to their include path.
 */
#ifndef SMARTIO_DIS_TYPES_H
#define SMARTIO_DIS_TYPES_H

/*
 * The most adapters one node has (Dolphin's "number of SCI interfaces"): adapter numbers
 * run from 0 to DIS_MAX_NSCIS - 1, and programs size per-adapter arrays with it. The
 * cluster daemon refuses a scenario with a host of more adapters.
 */
#define DIS_MAX_NSCIS 4

/* The node ids an adapter name stands for (SCIGetNodeIdByAdapterName): at most one per
 * adapter, the rest 0. */
typedef unsigned int dis_nodeId_list_t[DIS_MAX_NSCIS + 1];

/* What kind of adapter a name stands for; every adapter of the live engine is a physical one
 * (smartio's value: no public source gives the others'). */
typedef enum {
    DIS_VIRTUAL_ADAPTER_NONE = 0
} dis_virt_adapter_t;

/* The node id that names every node of a multicast group (broadcast connections). */
#define DIS_BROADCAST_NODEID_GROUP_ALL 252

#endif
