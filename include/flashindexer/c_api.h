/* flashindexer: a C ABI over the three operators, for bindings that load the shared library
 * libflashindexer_c.so (Python's ctypes, other languages) and so depend on no C++ ABI.
 *
 * The structs are the C++ ones of problem.h, field for field, with enums as int32:
 *   format: 0 fp8_e4m3, 1 mxfp4     weight_type: 0 fp32, 1 bf16     row_form: 0 ragged, 1 decode
 *   order:  0 position, 1 rank      accuracy: 0 exact, 1 production (the default)
 *   backend: 0 auto, 1 cpu, 2 cuda  op: 0 dense_logits, 1 topk_over_logits, 2 fused_topk
 * fi_*_init() fill a struct with the C++ defaults. Every function returns a StatusCode
 * (0 = ok) and, when msg is not null, writes the status text ("ok" or the argument, expected
 * and actual value) into msg[0..msg_len), NUL-terminated. Same rules as operators.h: no
 * allocation, no synchronisation, work enqueued on launch->stream (a cudaStream_t). */
#ifndef FLASHINDEXER_C_API_H_
#define FLASHINDEXER_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_C_ABI_VERSION 1

typedef struct fi_indexer_problem {
  /* cache (CONTRACT §2.1) */
  int32_t format;
  int32_t page_size;
  const void* pool;            /* [num_pages, page_stride] bytes */
  int64_t page_stride;         /* bytes */
  int64_t num_pages;
  const int32_t* table;        /* [num_requests, table_width] or NULL (contiguous) */
  int64_t table_width;
  int64_t table_row_stride;    /* elements */
  /* queries (§2.2) */
  int32_t num_heads;
  int32_t weight_type;
  const void* q;               /* [rows, H, D] e4m3 or [rows, H, D/2] E2M1 */
  int64_t q_row_stride;        /* bytes */
  int64_t q_head_stride;       /* bytes */
  const uint8_t* q_scale;      /* [rows, H, D/32] UE8M0 (mxfp4) or NULL */
  int64_t q_scale_row_stride;  /* bytes */
  int64_t q_scale_head_stride; /* bytes */
  const void* weights;         /* [rows, H] fp32 or bf16 */
  int64_t weights_row_stride;  /* elements */
  float weight_scale;
  /* rows (§2.3) */
  int32_t row_form;
  int32_t num_requests;
  int32_t next_n;
  int64_t num_rows;            /* ragged */
  const int32_t* row_batch;    /* [rows] ragged */
  const int32_t* window_start; /* [rows] ragged */
  const int32_t* window_end;   /* [rows] ragged, exclusive */
  const int32_t* context_lens; /* [num_requests] decode */
  int64_t max_context;
  /* selection (§3) and scores (§4) */
  int32_t k;
  int32_t order;
  int32_t accuracy;
} fi_indexer_problem;

typedef struct fi_topk_problem {
  const float* logits;         /* [rows, max_context] fp32 */
  int64_t logits_row_stride;   /* elements */
  int32_t row_form;
  int32_t num_requests;
  int32_t next_n;
  int64_t num_rows;
  const int32_t* row_batch;
  const int32_t* window_start;
  const int32_t* window_end;
  const int32_t* context_lens;
  int64_t max_context;
  int32_t page_size;           /* slots: table[b][s / page_size] * page_size + s % page_size */
  int64_t num_pages;
  const int32_t* table;
  int64_t table_width;
  int64_t table_row_stride;
  int32_t k;
  int32_t order;
} fi_topk_problem;

typedef struct fi_topk_outputs {
  int32_t* positions;          /* [rows, K], -1 padding (required) */
  int64_t positions_row_stride;
  int32_t* slots;              /* [rows, K] or NULL */
  int64_t slots_row_stride;
  float* scores;               /* [rows, K] or NULL */
  int64_t scores_row_stride;
  int32_t* counts;             /* [rows] or NULL */
  uint32_t* status;            /* [rows] or NULL */
} fi_topk_outputs;

typedef struct fi_logits_output {
  float* logits;               /* [rows, max_context] */
  int64_t row_stride;          /* elements */
  uint32_t* status;            /* [rows] or NULL */
} fi_logits_output;

typedef struct fi_launch {
  int32_t backend;
  int32_t cpu_threads;         /* cpu: worker threads, 0 = all */
  void* workspace;
  size_t workspace_bytes;
  void* stream;                /* cudaStream_t for cuda */
} fi_launch;

int fi_abi_version(void);
void fi_indexer_problem_init(fi_indexer_problem* p);
void fi_topk_problem_init(fi_topk_problem* p);
void fi_launch_init(fi_launch* l);

int fi_can_implement(const fi_indexer_problem* p, int32_t op, const fi_launch* l, char* msg, size_t msg_len);
int fi_workspace_size(const fi_indexer_problem* p, int32_t op, const fi_launch* l, size_t* bytes, char* msg,
                      size_t msg_len);
int fi_dense_logits(const fi_indexer_problem* p, const fi_logits_output* out, const fi_launch* l, char* msg,
                    size_t msg_len);
int fi_fused_topk(const fi_indexer_problem* p, const fi_topk_outputs* out, const fi_launch* l, char* msg,
                  size_t msg_len);

int fi_topk_can_implement(const fi_topk_problem* p, const fi_launch* l, char* msg, size_t msg_len);
int fi_topk_workspace_size(const fi_topk_problem* p, const fi_launch* l, size_t* bytes, char* msg, size_t msg_len);
int fi_topk_over_logits(const fi_topk_problem* p, const fi_topk_outputs* out, const fi_launch* l, char* msg,
                        size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* FLASHINDEXER_C_API_H_ */
