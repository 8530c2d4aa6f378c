// Carrier of the tests' precompiled header (see tests/CMakeLists.txt).
