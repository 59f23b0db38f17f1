#include "CSQLiteConfig.h"
