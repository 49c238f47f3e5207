//! The `SCI_ERR_*` values the library itself returns (the daemon's errors carry their own,
//! from [`smartio_smartio::SciErrorClass::code`]). `include/sisci_error.h` defines the same
//! numbers; a test reads the header and compares.

use smartio_smartio::SCI_ERR_MASK;

/// `SCI_ERR_OK`.
pub const OK: u32 = 0;
/// `SCI_ERR_BUSY`.
pub const BUSY: u32 = SCI_ERR_MASK | 0x900;
/// `SCI_ERR_ILLEGAL_FLAG`.
pub const ILLEGAL_FLAG: u32 = SCI_ERR_MASK | 0x902;
/// `SCI_ERR_NOT_IMPLEMENTED`.
pub const NOT_IMPLEMENTED: u32 = SCI_ERR_MASK | 0x907;
/// `SCI_ERR_TIMEOUT`.
pub const TIMEOUT: u32 = SCI_ERR_MASK | 0x90A;
/// `SCI_ERR_OUT_OF_RANGE`.
pub const OUT_OF_RANGE: u32 = SCI_ERR_MASK | 0x90B;
/// `SCI_ERR_NO_SUCH_SEGMENT`.
pub const NO_SUCH_SEGMENT: u32 = SCI_ERR_MASK | 0x90C;
/// `SCI_ERR_CONNECTION_REFUSED`.
pub const CONNECTION_REFUSED: u32 = SCI_ERR_MASK | 0x90E;
/// `SCI_ERR_ILLEGAL_PARAMETER`.
pub const ILLEGAL_PARAMETER: u32 = SCI_ERR_MASK | 0x912;
/// `SCI_ERR_SIZE_ALIGNMENT`.
pub const SIZE_ALIGNMENT: u32 = SCI_ERR_MASK | 0x910;
/// `SCI_ERR_ILLEGAL_ADDRESS`.
pub const ILLEGAL_ADDRESS: u32 = SCI_ERR_MASK | 0x915;
/// `SCI_ERR_ILLEGAL_OPERATION`.
pub const ILLEGAL_OPERATION: u32 = SCI_ERR_MASK | 0x916;
/// `SCI_ERR_ILLEGAL_QUERY`.
pub const ILLEGAL_QUERY: u32 = SCI_ERR_MASK | 0x917;
/// `SCI_ERR_MAX_ENTRIES`.
pub const MAX_ENTRIES: u32 = SCI_ERR_MASK | 0x913;
/// `SCI_ERR_CANCELLED`.
pub const CANCELLED: u32 = SCI_ERR_MASK | 0x91A;
/// `SCI_ERR_TRANSFER_FAILED`.
pub const TRANSFER_FAILED: u32 = SCI_ERR_MASK | 0xA06;
/// `SCI_ERR_SYSTEM`.
pub const SYSTEM: u32 = SCI_ERR_MASK | 0x919;
/// `SCI_ERR_NO_SUCH_FDID` (smartio's value: no public source gives one).
pub const NO_SUCH_FDID: u32 = SCI_ERR_MASK | 0xC01;
/// `SCI_ERR_NOT_AVAILABLE`.
pub const NOT_AVAILABLE: u32 = SCI_ERR_MASK | 0x91C;
/// `SCI_ERR_NOT_INITIALIZED`.
pub const NOT_INITIALIZED: u32 = SCI_ERR_MASK | 0x920;

/// The message of `SCIGetErrorString`, NUL-terminated.
pub fn describe(code: u32) -> &'static str {
    match code {
        OK => "SCI_ERR_OK: success\0",
        c if c == BUSY => "SCI_ERR_BUSY: the object is in use\0",
        c if c == ILLEGAL_FLAG => "SCI_ERR_ILLEGAL_FLAG: a flag this call does not take\0",
        c if c == NOT_IMPLEMENTED => {
            "SCI_ERR_NOT_IMPLEMENTED: not supported by smartio's live engine\0"
        }
        c if c == TIMEOUT => "SCI_ERR_TIMEOUT: nothing arrived in time\0",
        c if c == OUT_OF_RANGE => "SCI_ERR_OUT_OF_RANGE: an offset or length outside the object\0",
        c if c == NO_SUCH_SEGMENT => {
            "SCI_ERR_NO_SUCH_SEGMENT: no such segment (or interrupt) on that node\0"
        }
        c if c == CONNECTION_REFUSED => {
            "SCI_ERR_CONNECTION_REFUSED: the segment is not available\0"
        }
        c if c == ILLEGAL_PARAMETER => {
            "SCI_ERR_ILLEGAL_PARAMETER: a handle, id or size that names nothing valid\0"
        }
        c if c == ILLEGAL_QUERY => "SCI_ERR_ILLEGAL_QUERY: an unknown query\0",
        c if c == SYSTEM => "SCI_ERR_SYSTEM: the cluster daemon could not be reached\0",
        c if c == NOT_INITIALIZED => "SCI_ERR_NOT_INITIALIZED: SCIInitialize was not called\0",
        c if c == SCI_ERR_MASK | 0x904 => "SCI_ERR_NOSPC: out of memory for the segment\0",
        c if c == SCI_ERR_MASK | 0x906 => {
            "SCI_ERR_HW_NOSPC: out of NTB look-up-table, requester-id or window space\0"
        }
        c if c == SCI_ERR_MASK | 0x909 => {
            "SCI_ERR_NO_SUCH_ADAPTERNO: no adapter with that number\0"
        }
        c if c == SCI_ERR_MASK | 0x914 => {
            "SCI_ERR_SEGMENT_NOT_PREPARED: the segment is not prepared on that adapter\0"
        }
        c if c == SIZE_ALIGNMENT => {
            "SCI_ERR_SIZE_ALIGNMENT: a size no segment can have (none, or not whole pages)\0"
        }
        c if c == ILLEGAL_ADDRESS => {
            "SCI_ERR_ILLEGAL_ADDRESS: an address the requester cannot use\0"
        }
        c if c == ILLEGAL_OPERATION => "SCI_ERR_ILLEGAL_OPERATION: not allowed on this object\0",
        c if c == SCI_ERR_MASK | 0x918 => "SCI_ERR_SEGMENTID_USED: the segment id is taken\0",
        c if c == SCI_ERR_MASK | 0x91B => "SCI_ERR_NOT_CONNECTED: no working path\0",
        c if c == NOT_AVAILABLE => "SCI_ERR_NOT_AVAILABLE: the device is held by someone else\0",
        c if c == SCI_ERR_MASK | 0xA00 => "SCI_ERR_NO_SUCH_NODEID: no adapter has that node id\0",
        c if c == TRANSFER_FAILED => "SCI_ERR_TRANSFER_FAILED: an access on the fabric failed\0",
        c if c == MAX_ENTRIES => {
            "SCI_ERR_MAX_ENTRIES: more entries than the DMA queue or vector holds\0"
        }
        c if c == CANCELLED => "SCI_ERR_CANCELLED: the operation was aborted\0",
        c if c == SCI_ERR_MASK | 0xA05 => {
            "SCI_ERR_NO_LINK_ACCESS: a link between the adapters is down\0"
        }
        c if c == SCI_ERR_MASK | 0x90D => "SCI_ERR_ILLEGAL_NODEID: not a node id\0",
        c if c == NO_SUCH_FDID => "SCI_ERR_NO_SUCH_FDID: no device has that fabric device id\0",
        _ => "unknown SISCI error\0",
    }
}
