//! Shared by the SmartIO scenario tests.

use smartio_engine::Sim;

/// Every hardware table SmartIO touches ([`smartio_fabric::Fabric::tables_in_use`]).
pub fn tables(sim: &Sim) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
    sim.fabric().tables_in_use()
}
