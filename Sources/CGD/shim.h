#ifndef CGD_SHIM_H
#define CGD_SHIM_H
#include <gd.h>
#endif
