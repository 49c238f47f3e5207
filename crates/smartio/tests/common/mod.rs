//! Shared by the SmartIO scenario tests.

use smartio_machine::Machine;

/// Every hardware table SmartIO touches ([`smartio_fabric::Fabric::tables_in_use`]).
pub fn tables(machine: &Machine) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
    machine.fabric().tables_in_use()
}
