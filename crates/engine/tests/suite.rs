//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod ahead;
mod bursts;
mod common;
mod deferred;
mod executor;
mod forwarding;
mod in_place;
mod iotlb;
mod landing;
mod posted;
mod reads;
mod record;
mod route_cache;
mod single_read;
mod timing;
