//! The `drover` binary: thin glue over the library crates.

fn main() {
    println!("drover {}", env!("CARGO_PKG_VERSION"));
}
