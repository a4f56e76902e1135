//! Tests (filled in below).
