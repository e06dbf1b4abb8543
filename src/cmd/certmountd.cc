// certmountd: the CSI node plugin kubelet talks to. Everything it does is in
// certmountd_main.cc (the flags) and src/node/ (the node they configure).
#include "cmd/certmountd_main.h"

int main(int argc, char** argv) { return certmount::CertmountdMain(argc, argv); }
