// Gemma 3 270M's output projection alone: a Q8_0 [640 x 262144] matrix times 1..4 columns
// (one per busy slot), wall and CPU ms per product, to see what batching slots buys in
// ggml's CPU kernels (docs/performance.md, "Why four slots add little on this CPU").
//
// Build against the static ggml libraries of a llama.cpp build tree (the vendored tree of
// the llama-cpp-python 0.3.36 sdist, configured with orch local build's flags, then
// `cmake --build OUT --target ggml`):
//   g++ -O2 -std=c++17 bench/local_matmul.cpp -ISRC/ggml/include -LOUT/ggml/src \
//       -lggml -lggml-cpu -lggml-base -lpthread -lgomp -o /tmp/local_matmul
//   /tmp/local_matmul [threads=1] [8|5: Q8_0 or Q5_0] [rows=262144]
#include "ggml.h"
#include "ggml-cpu.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <ctime>
static double cpu_ms() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
int main(int argc, char ** argv) {
    ggml_cpu_init();
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    ggml_type type = argc > 2 && argv[2][0] == '5' ? GGML_TYPE_Q5_0 : GGML_TYPE_Q8_0;
    const int K = 640, M = argc > 3 ? atoi(argv[3]) : 262144;
    size_t mem = (size_t)M * K * 2 + 64u * 1024 * 1024;
    ggml_init_params ip = {mem, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, K, M);
    std::vector<float> tmp((size_t)K * 1024);
    for (auto & x : tmp) x = (rand() / (float)RAND_MAX - 0.5f);
    for (int r = 0; r < M; r += 1024)
        ggml_quantize_chunk(type, tmp.data(), (char *)w->data + ggml_row_size(type, K) * r, 0, 1024, K, nullptr);
    for (int n = 1; n <= 4; n++) {
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, n);
        for (int i = 0; i < K * n; i++) ((float *)x->data)[i] = rand() / (float)RAND_MAX;
        ggml_tensor * y = ggml_mul_mat(ctx, w, x);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, y);
        ggml_graph_compute_with_ctx(ctx, gf, threads);
        int reps = 20;
        double c0 = cpu_ms();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; i++) ggml_graph_compute_with_ctx(ctx, gf, threads);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
        double cms = (cpu_ms() - c0) / reps;
        printf("%s n=%d threads=%d: wall %.2f ms, cpu %.2f ms per product, cpu %.2f ms per column\n",
               type == GGML_TYPE_Q8_0 ? "q8_0" : "q5_0", n, threads, ms, cms, cms / n);
    }
    return 0;
}
