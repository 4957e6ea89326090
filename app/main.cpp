#include "cli/cli.h"

int main(int argc, char** argv) { return fgm::run_cli(argc, argv); }
