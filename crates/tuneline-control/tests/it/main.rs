//! The integration tests of tuneline-control, one binary (one link) for all:
//! the control plane's API, credentials, bounds, autoscaler, gangs, dashboard and assembled plane.

mod api;
mod autoscale;
mod bounds;
mod common;
mod credentials;
mod dashboard;
mod gangs;
mod plane;
