/*
 * sisci_error.h -- smartio's SISCI library: error codes.
 *
 * Written for smartio (MIT OR Apache-2.0) to be source compatible with programs for the
 * public SISCI API. Every error but SCI_ERR_OK has SCI_ERR_MASK set; the numbers are those
 * public SISCI code compares against. SCI_ERR_NO_SUCH_FDID and SCI_ERR_NOT_SUPPORTED, whose
 * numbers no public source gives, sit in a range SISCI does not use (0xC00 upwards).
 */
#ifndef SMARTIO_SISCI_ERROR_H
#define SMARTIO_SISCI_ERROR_H

#define SCI_ERR_MASK 0x40000000
#define SISCI_ERR_MASK SCI_ERR_MASK

typedef enum {
    SCI_ERR_OK                    = 0x000,
    SCI_ERR_BUSY                  = (0x900 | SCI_ERR_MASK),
    SCI_ERR_FLAG_NOT_IMPLEMENTED  = (0x901 | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_FLAG          = (0x902 | SCI_ERR_MASK),
    SCI_ERR_NOSPC                 = (0x904 | SCI_ERR_MASK),
    SCI_ERR_API_NOSPC             = (0x905 | SCI_ERR_MASK),
    SCI_ERR_HW_NOSPC              = (0x906 | SCI_ERR_MASK),
    SCI_ERR_NOT_IMPLEMENTED       = (0x907 | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_ADAPTERNO     = (0x908 | SCI_ERR_MASK),
    SCI_ERR_NO_SUCH_ADAPTERNO     = (0x909 | SCI_ERR_MASK),
    SCI_ERR_TIMEOUT               = (0x90A | SCI_ERR_MASK),
    SCI_ERR_OUT_OF_RANGE          = (0x90B | SCI_ERR_MASK),
    SCI_ERR_NO_SUCH_SEGMENT       = (0x90C | SCI_ERR_MASK),
    SCI_ERR_NO_SUCH_INTNO         = (0x90C | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_NODEID        = (0x90D | SCI_ERR_MASK),
    SCI_ERR_CONNECTION_REFUSED    = (0x90E | SCI_ERR_MASK),
    SCI_ERR_SEGMENT_NOT_CONNECTED = (0x90F | SCI_ERR_MASK),
    SCI_ERR_SIZE_ALIGNMENT        = (0x910 | SCI_ERR_MASK),
    SCI_ERR_OFFSET_ALIGNMENT      = (0x911 | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_PARAMETER     = (0x912 | SCI_ERR_MASK),
    SCI_ERR_MAX_ENTRIES           = (0x913 | SCI_ERR_MASK),
    SCI_ERR_SEGMENT_NOT_PREPARED  = (0x914 | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_ADDRESS       = (0x915 | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_OPERATION     = (0x916 | SCI_ERR_MASK),
    SCI_ERR_ILLEGAL_QUERY         = (0x917 | SCI_ERR_MASK),
    SCI_ERR_SEGMENTID_USED        = (0x918 | SCI_ERR_MASK),
    SCI_ERR_SYSTEM                = (0x919 | SCI_ERR_MASK),
    SCI_ERR_CANCELLED             = (0x91A | SCI_ERR_MASK),
    SCI_ERR_NOT_CONNECTED         = (0x91B | SCI_ERR_MASK),
    SCI_ERR_NOT_AVAILABLE         = (0x91C | SCI_ERR_MASK),
    SCI_ERR_INCONSISTENT_VERSIONS = (0x91D | SCI_ERR_MASK),
    SCI_ERR_COND_INT_RACE_PROBLEM = (0x91E | SCI_ERR_MASK),
    SCI_ERR_OVERFLOW              = (0x91F | SCI_ERR_MASK),
    SCI_ERR_NOT_INITIALIZED       = (0x920 | SCI_ERR_MASK),
    SCI_ERR_ACCESS                = (0x921 | SCI_ERR_MASK),
    SCI_ERR_NO_SUCH_NODEID        = (0xA00 | SCI_ERR_MASK),
    SCI_ERR_NODE_NOT_RESPONDING   = (0xA02 | SCI_ERR_MASK),
    SCI_ERR_NO_REMOTE_LINK_ACCESS = (0xA04 | SCI_ERR_MASK),
    SCI_ERR_NO_LINK_ACCESS        = (0xA05 | SCI_ERR_MASK),
    SCI_ERR_TRANSFER_FAILED       = (0xA06 | SCI_ERR_MASK),
    SCI_ERR_REMOTE_BUSY           = (0xB00 | SCI_ERR_MASK),
    SCI_ERR_NOT_SUPPORTED         = (0xC00 | SCI_ERR_MASK),
    SCI_ERR_NO_SUCH_FDID          = (0xC01 | SCI_ERR_MASK)
} sci_error_t;

#endif
