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

/* The node id that names every node of a multicast group (broadcast connections). */
#define DIS_BROADCAST_NODEID_GROUP_ALL 252

#endif
