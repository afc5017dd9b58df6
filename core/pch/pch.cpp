// Compiles the precompiled header.
