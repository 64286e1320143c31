# myelin-gen: reads C++ headers that declare Myelin endpoint classes and emits
# the traits and stubs (`<stem>_gen.h`, `<stem>_gen.cpp`) the runtime needs.
# See docs/generated-code.md for the exact contract.

__version__ = "0.1.0"
