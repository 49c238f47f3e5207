//! Paper III/IV's machines: the two scenarios both its bandwidth figures (`paper3`) and its
//! latency figures (`paper3_latency`) run on.

/// Paper III/IV's machines, the lenders' IOMMUs off.
pub const MESH: &str = "mesh-3";
/// The same machines, the lenders' IOMMUs on.
pub const MESH_IOMMU: &str = "mesh-3-lender-iommu";
