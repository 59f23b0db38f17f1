#ifndef CLIBSSH2_SHIM_H
#define CLIBSSH2_SHIM_H
#include <libssh2.h>
#include <libssh2_sftp.h>
#endif
