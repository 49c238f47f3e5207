//! The NIC's internal switch (eswitch): where a frame goes, by destination address, among the
//! NIC's functions and its Ethernet port.
//!
//! - Sent by a function: to a function of this NIC whose address is the destination, straight
//!   to its receive path without using the wire (only DMA and the eswitch's forwarding cost);
//!   a group address (broadcast, multicast) to every other function and out of the port; any
//!   other address out of the port.
//! - Taken off the wire: to the function whose address is the destination, a group address to
//!   every function, any other address to none (filtered and counted).

use crate::ethernet::MacAddr;

/// Where a frame a function sent goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Functions (by index) that receive it through the eswitch.
    pub functions: Vec<usize>,
    /// Whether it also goes out of the port.
    pub wire: bool,
}

/// The route of a frame to `dst` sent by function `from`, among functions with addresses
/// `macs` (by function index).
pub fn route_sent(dst: MacAddr, from: usize, macs: &[MacAddr]) -> Route {
    if dst.is_group() {
        return Route {
            functions: (0..macs.len()).filter(|&f| f != from).collect(),
            wire: true,
        };
    }
    match macs.iter().position(|&m| m == dst) {
        Some(f) => Route {
            functions: vec![f],
            wire: false,
        },
        None => Route {
            functions: Vec::new(),
            wire: true,
        },
    }
}

/// The functions that receive a frame to `dst` taken off the wire.
pub fn route_received(dst: MacAddr, macs: &[MacAddr]) -> Vec<usize> {
    if dst.is_group() {
        return (0..macs.len()).collect();
    }
    macs.iter().position(|&m| m == dst).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PF: MacAddr = MacAddr([2, 0, 0, 0, 0, 0]);
    const VF: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const OTHER: MacAddr = MacAddr([2, 9, 9, 9, 9, 9]);

    #[test]
    fn a_frame_to_another_function_stays_off_the_wire() {
        assert_eq!(
            route_sent(VF, 0, &[PF, VF]),
            Route {
                functions: vec![1],
                wire: false
            }
        );
    }

    #[test]
    fn a_frame_to_a_foreign_address_goes_only_to_the_wire() {
        assert_eq!(
            route_sent(OTHER, 0, &[PF, VF]),
            Route {
                functions: vec![],
                wire: true
            }
        );
    }

    #[test]
    fn group_frames_go_to_the_other_functions_and_the_wire() {
        assert_eq!(
            route_sent(MacAddr::BROADCAST, 1, &[PF, VF, OTHER]),
            Route {
                functions: vec![0, 2],
                wire: true
            }
        );
        assert_eq!(route_received(MacAddr::BROADCAST, &[PF, VF]), vec![0, 1]);
    }

    #[test]
    fn frames_off_the_wire_reach_only_their_function() {
        assert_eq!(route_received(VF, &[PF, VF]), vec![1]);
        assert!(route_received(OTHER, &[PF, VF]).is_empty());
    }
}
