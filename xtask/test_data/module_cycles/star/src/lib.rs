//! A hub and two spokes that use each other: one component, reported once, with its shortest
//! cycle and the other members named.

mod hub;
mod left;
mod right;
