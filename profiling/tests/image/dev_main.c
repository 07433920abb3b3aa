#include "views.h"
int mpt_cmd_image(int argc, char **argv);
int main(int argc, char **argv) { return mpt_cmd_image(argc - 1, argv + 1); }
