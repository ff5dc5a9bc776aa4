//! Two siblings that import each other.

mod a;
mod b;
mod c;
