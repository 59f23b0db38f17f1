#ifndef CLIBCRYPTO_SHIM_H
#define CLIBCRYPTO_SHIM_H
// OpenSSL's libcrypto, for its SHA-256 and MD5 (the EVP digest calls): the engine hashes every
// download and upload with it (Sources/ProviderEngine/Transfer/FastSHA256.swift), adapters the
// bodies they send (Adapters/Kit/LibCryptoDigest.swift). Already loaded by
// libcurl and libssh2; with the CPU's SHA extensions it hashes about 1.7 GB/s here.
#include <openssl/evp.h>
#endif
