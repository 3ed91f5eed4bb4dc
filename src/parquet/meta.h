/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet file metadata: the footer (FileMetaData), page headers and offset
 * indexes, decoded from the Thrift compact protocol (thrift.c) into plain
 * structs, and the schema reduced to what dpp reads: top-level fields that
 * are a primitive (required or optional) or a list of primitives. Facts:
 * ../shared/REFERENCE.md "Parquet"; parquet-format's parquet.thrift and
 * LogicalTypes.md. Nothing here reads a file: callers hand in bytes, so the
 * master (footers) and the worker (pages) share it and the fuzz targets
 * drive it directly. */
#ifndef DPP_PARQUET_META_H
#define DPP_PARQUET_META_H

#include <stddef.h>
#include <stdint.h>

/* Physical types (parquet.thrift Type). */
typedef enum dpp_pq_type {
    DPP_PQ_BOOLEAN = 0,
    DPP_PQ_INT32 = 1,
    DPP_PQ_INT64 = 2,
    DPP_PQ_INT96 = 3,
    DPP_PQ_FLOAT = 4,
    DPP_PQ_DOUBLE = 5,
    DPP_PQ_BYTE_ARRAY = 6,
    DPP_PQ_FIXED_LEN_BYTE_ARRAY = 7,
} dpp_pq_type_t;

/* Codecs (parquet.thrift CompressionCodec). */
typedef enum dpp_pq_codec {
    DPP_PQ_UNCOMPRESSED = 0,
    DPP_PQ_SNAPPY = 1,
    DPP_PQ_GZIP = 2,
    DPP_PQ_LZO = 3,
    DPP_PQ_BROTLI = 4,
    DPP_PQ_LZ4 = 5, /* deprecated; Hadoop framing in practice */
    DPP_PQ_ZSTD = 6,
    DPP_PQ_LZ4_RAW = 7,
} dpp_pq_codec_t;

/* Encodings (parquet.thrift Encoding). */
typedef enum dpp_pq_encoding {
    DPP_PQ_PLAIN = 0,
    DPP_PQ_PLAIN_DICTIONARY = 2,
    DPP_PQ_RLE = 3,
    DPP_PQ_BIT_PACKED = 4,
    DPP_PQ_DELTA_BINARY_PACKED = 5,
    DPP_PQ_DELTA_LENGTH_BYTE_ARRAY = 6,
    DPP_PQ_DELTA_BYTE_ARRAY = 7,
    DPP_PQ_RLE_DICTIONARY = 8,
    DPP_PQ_BYTE_STREAM_SPLIT = 9,
} dpp_pq_encoding_t;

typedef enum dpp_pq_page_type {
    DPP_PQ_DATA_PAGE = 0,
    DPP_PQ_INDEX_PAGE = 1,
    DPP_PQ_DICTIONARY_PAGE = 2,
    DPP_PQ_DATA_PAGE_V2 = 3,
} dpp_pq_page_type_t;

/* Limits that keep a hostile footer from costing more than it is worth. */
#define DPP_PQ_MAX_FOOTER (64u << 20) /* footer bytes */
#define DPP_PQ_MAX_DEPTH 64           /* Thrift struct/list nesting */
#define DPP_PQ_MAX_COLUMNS 100000     /* leaf columns */
#define DPP_PQ_MAX_ROW_GROUPS 1000000 /* row groups in one file */
#define DPP_PQ_MAX_PAGE (256u << 20)  /* a page's compressed or uncompressed size */

/* How a top-level field maps onto a dpp feature. */
typedef enum dpp_pq_shape {
    DPP_PQ_SCALAR = 0,      /* required or optional primitive: one value or null */
    DPP_PQ_LIST = 1,        /* LIST<primitive> (3-level or a legacy 2-level form) or a
                               repeated primitive: a list per row, maybe null or empty */
    DPP_PQ_UNSUPPORTED = 2, /* anything else; `why` says what */
} dpp_pq_shape_t;

/* A top-level field of the schema, as dpp reads it. For SCALAR and LIST
 * it has exactly one leaf column, `column`. Levels of one entry of that
 * column (def = definition level):
 *  - SCALAR: a value when def == max_def, null otherwise.
 *  - LIST: def < def_list: the list is null; def_list <= def < def_elem:
 *    the list is empty; def >= def_elem: one element, a value when
 *    def == max_def, a null element otherwise. rep == 0 starts a row.
 * (A required list has def_list 0; a top-level repeated primitive has
 * def_list 0 and def_elem 1.) */
typedef struct dpp_pq_field {
    char *name; /* top-level name: what a spec's feature names */
    dpp_pq_shape_t shape;
    char why[160];   /* UNSUPPORTED: e.g. "a MAP", "nested 3 lists deep" */
    uint32_t column; /* index of its leaf in dpp_pq_meta_t.columns */
    int16_t def_list, def_elem;
} dpp_pq_field_t;

/* A leaf column in schema order (the order of every row group's chunks). */
typedef struct dpp_pq_column {
    char *path; /* dotted, e.g. "tags.list.element" */
    dpp_pq_type_t type;
    int32_t type_length; /* FIXED_LEN_BYTE_ARRAY */
    int16_t max_def, max_rep;
    int32_t converted_type; /* parquet.thrift ConvertedType, -1 when unset */
    int32_t logical_type;   /* field id of the LogicalType union member set, -1 when unset */
    int is_decimal;         /* DECIMAL by converted or logical type */
    int is_unsigned;        /* UINT_8..UINT_64, or INTEGER(isSigned = false) */
} dpp_pq_column_t;

/* A column chunk of a row group. */
typedef struct dpp_pq_chunk {
    dpp_pq_codec_t codec;
    dpp_pq_type_t type;
    int64_t num_values;
    int64_t data_page_offset;
    int64_t dictionary_page_offset; /* -1 when unset */
    int64_t total_compressed_size;
    int64_t offset_index_offset; /* -1 when unset */
    int32_t offset_index_length;
    int encrypted; /* crypto_metadata or encrypted_column_metadata present */
} dpp_pq_chunk_t;

typedef struct dpp_pq_row_group {
    int64_t num_rows;
    int64_t first_row;      /* rows of the row groups before it (computed) */
    dpp_pq_chunk_t *chunks; /* ncolumns entries, in column order */
} dpp_pq_row_group_t;

typedef struct dpp_pq_meta {
    int32_t version;
    int64_t num_rows;
    dpp_pq_column_t *columns;
    uint32_t ncolumns;
    dpp_pq_field_t *fields;
    uint32_t nfields;
    dpp_pq_row_group_t *row_groups;
    uint32_t nrow_groups;
    char *created_by; /* NULL when unset */
    struct dpp_pq_mem *mem; /* what all of the above points into (meta.c) */
} dpp_pq_meta_t;

/* Where the footer is: given the last 8 bytes of a file of file_size bytes,
 * sets *footer_len (the FileMetaData's length, which ends 8 bytes before the
 * end). Returns 0, or DPP_ECORRUPT with a sentence in err: the file is
 * shorter than 12 bytes, the magic is not "PAR1" ("PARE": an encrypted
 * footer, refused as such), or the length does not fit the file or exceeds
 * DPP_PQ_MAX_FOOTER. */
int dpp_pq_footer_locate(const uint8_t tail[8], uint64_t file_size, uint32_t *footer_len, char *err,
                         size_t errlen);

/* Decodes a FileMetaData of len bytes (the footer without its length and
 * magic) into *m, checked against the file's size: every chunk's byte range
 * lies inside [4, file_size - 8 - len), row counts are >= 0 and add up to
 * num_rows, the schema tree is consistent (children counts), the chunk
 * count of every row group equals the leaf count, and each chunk's type is
 * its column's. Returns 0 (free *m with dpp_pq_meta_free) or DPP_ECORRUPT /
 * -ENOMEM, err naming what is wrong and the byte offset in the footer.
 * Unknown Thrift fields are skipped; nesting deeper than DPP_PQ_MAX_DEPTH is
 * refused, not recursed into. */
int dpp_pq_meta_parse(const uint8_t *buf, size_t len, uint64_t file_size, dpp_pq_meta_t *m,
                      char *err, size_t errlen);
void dpp_pq_meta_free(dpp_pq_meta_t *m);

/* The field named name, or NULL. */
const dpp_pq_field_t *dpp_pq_meta_field(const dpp_pq_meta_t *m, const char *name);

/* A page header. Sizes are checked against DPP_PQ_MAX_PAGE and >= 0. */
typedef struct dpp_pq_page_header {
    dpp_pq_page_type_t type;
    int32_t uncompressed_size, compressed_size;
    int has_crc;
    uint32_t crc;
    int32_t num_values;         /* data v1/v2 and dictionary */
    dpp_pq_encoding_t encoding; /* of the values (dictionary: of the dictionary) */
    dpp_pq_encoding_t def_encoding, rep_encoding; /* v1 */
    /* v2 */
    int32_t num_nulls, num_rows;
    int32_t def_levels_len, rep_levels_len;
    int is_compressed; /* v2; 1 when unset */
} dpp_pq_page_header_t;

/* Decodes the page header at the start of buf[0..len). Returns 0 with
 * *consumed = its length; -EAGAIN when buf ends inside the header (read
 * more and call again; a header longer than DPP_PQ_MAX_FOOTER is
 * DPP_ECORRUPT); DPP_ECORRUPT with err for a malformed header (negative or
 * oversized sizes, a v2 level length larger than the page, an unknown page
 * type or a data page without its data_page_header). */
int dpp_pq_page_header_parse(const uint8_t *buf, size_t len, dpp_pq_page_header_t *h,
                             size_t *consumed, char *err, size_t errlen);

/* One entry of an offset index (PageLocation). */
typedef struct dpp_pq_page_loc {
    int64_t offset;
    int32_t compressed_page_size; /* including the header */
    int64_t first_row_index;      /* within the row group */
} dpp_pq_page_loc_t;

/* Decodes an OffsetIndex: *locs (malloc'd, *n entries; free()) in file
 * order. Checked: offsets and first rows increase. Returns 0, DPP_ECORRUPT
 * with err, or -ENOMEM. */
int dpp_pq_offset_index_parse(const uint8_t *buf, size_t len, dpp_pq_page_loc_t **locs, size_t *n,
                              char *err, size_t errlen);

#endif
