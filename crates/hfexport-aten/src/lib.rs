//! The ATen op catalog and the lowering of core ops to ATen, shared by the two PyTorch-family writers (`.pt2` and `.pte` both speak ATen). Empty until the first of those writers lands.
