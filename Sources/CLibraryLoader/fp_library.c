// Header only: see include/fp_library.h.
