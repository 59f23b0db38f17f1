#ifndef CXML2_SHIM_H
#define CXML2_SHIM_H
// libxml2's push parser and SAX2 callbacks, for the WebDAV adapter's multistatus parser
// (Adapters/WebDAV/MultistatusReader.swift): element names, namespaces and text as bytes,
// without the String and dictionary FoundationXML's XMLParser makes of each.
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU, and its encoding.h would then include ICU's headers,
// which clash with the copy Foundation brings (module _FoundationICU). Nothing here touches
// the ICU members of libxml2's encoding handler (only pointers to it are in the structures
// this module reads), so the headers are read without them.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>

// XML_SAX2_MAGIC, which Swift does not import (a macro wider than Int32).
static const unsigned int fp_xml_sax2_magic = XML_SAX2_MAGIC;
#endif
