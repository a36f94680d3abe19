// Mamba-1 selective scan on the CPU: y_t = C_t . h_t + D u_t, h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t.
//
// Built on first use by windtunnel.models.scan_ext (torch.utils.cpp_extension). The state h of one
// batch row and a block of channels lives in a small buffer; the (T, B, D_inner, N) tensors of the
// pure-PyTorch scan are never made. The forward saves nothing beyond its inputs; the backward
// recomputes the states of one (batch row, channel block) into a T x N buffer that stays in cache
// and runs the adjoint recurrence over it in reverse, producing every gradient in one pass.
// Channels are the vector lanes (contiguous in u, dt, y); B_t, C_t are broadcast scalars. Work is
// split over (batch row, channel group); each item writes its own slots of the partial sums, so
// results do not depend on the number of threads.
//
// Shapes (all contiguous, one dtype): u, dt, y (Bt, T, Di); At = A transposed (N, Di);
// Bm, Cm (Bt, T, N); D (Di).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace {

using at::vec::Vectorized;

template <typename scalar_t>
inline Vectorized<scalar_t> load(const scalar_t* p, int64_t count) {
  constexpr int64_t W = Vectorized<scalar_t>::size();
  return count == W ? Vectorized<scalar_t>::loadu(p) : Vectorized<scalar_t>::loadu(p, count);
}

template <typename scalar_t>
inline void store(const Vectorized<scalar_t>& v, scalar_t* p, int64_t count) {
  constexpr int64_t W = Vectorized<scalar_t>::size();
  if (count == W) v.store(p); else v.store(p, count);
}

// Channel groups per batch row: enough work items to keep a few threads busy at small batch,
// a function of the shapes only (never of the thread count), so that sums are reproducible.
inline int64_t n_groups(int64_t batch, int64_t n_blocks) {
  return std::max<int64_t>(1, std::min<int64_t>(n_blocks, (64 + batch - 1) / batch));
}

void check(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& At, const at::Tensor& Bm,
           const at::Tensor& Cm, const at::Tensor& D) {
  TORCH_CHECK(u.dim() == 3 && dt.sizes() == u.sizes(), "u, dt must be (batch, T, d_inner)");
  TORCH_CHECK(At.dim() == 2 && At.size(1) == u.size(2), "At must be (d_state, d_inner)");
  TORCH_CHECK(Bm.dim() == 3 && Bm.size(0) == u.size(0) && Bm.size(1) == u.size(1) && Bm.size(2) == At.size(0),
              "B must be (batch, T, d_state)");
  TORCH_CHECK(Cm.sizes() == Bm.sizes(), "C must be (batch, T, d_state)");
  TORCH_CHECK(D.dim() == 1 && D.size(0) == u.size(2), "D must be (d_inner,)");
  for (const auto* x : {&u, &dt, &At, &Bm, &Cm, &D}) {
    TORCH_CHECK(x->device().is_cpu() && x->is_contiguous() && x->scalar_type() == u.scalar_type(),
                "selective scan: CPU tensors, contiguous, one dtype");
  }
}

at::Tensor scan_fwd(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& At, const at::Tensor& Bm,
                    const at::Tensor& Cm, const at::Tensor& D) {
  check(u, dt, At, Bm, Cm, D);
  const int64_t Bt = u.size(0), T = u.size(1), Di = u.size(2), N = At.size(0);
  auto y = at::empty_like(u);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan_fwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const int64_t n_blocks = (Di + W - 1) / W, G = n_groups(Bt, n_blocks);
    const scalar_t *pu = u.data_ptr<scalar_t>(), *pdt = dt.data_ptr<scalar_t>(), *pA = At.data_ptr<scalar_t>(),
                   *pB = Bm.data_ptr<scalar_t>(), *pC = Cm.data_ptr<scalar_t>(), *pD = D.data_ptr<scalar_t>();
    scalar_t* py = y.data_ptr<scalar_t>();
    at::parallel_for(0, Bt * G, 1, [&](int64_t begin, int64_t end) {
      std::vector<Vec> h(N), a(N);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / G, g = item % G;
        const scalar_t *Bb = pB + b * T * N, *Cb = pC + b * T * N;
        for (int64_t blk = g * n_blocks / G; blk < (g + 1) * n_blocks / G; ++blk) {
          const int64_t d0 = blk * W, cnt = std::min(W, Di - d0);
          for (int64_t n = 0; n < N; ++n) { a[n] = load(pA + n * Di + d0, cnt); h[n] = Vec(0); }
          const Vec Dv = load(pD + d0, cnt);
          for (int64_t t = 0; t < T; ++t) {
            const int64_t off = (b * T + t) * Di + d0;
            const Vec dtv = load(pdt + off, cnt), uv = load(pu + off, cnt), x = dtv * uv;
            const scalar_t *Bt_ = Bb + t * N, *Ct_ = Cb + t * N;
            Vec acc = Dv * uv;
            for (int64_t n = 0; n < N; ++n) {
              h[n] = at::vec::fmadd((dtv * a[n]).exp(), h[n], x * Vec(Bt_[n]));
              acc = at::vec::fmadd(h[n], Vec(Ct_[n]), acc);
            }
            store(acc, py + off, cnt);
          }
        }
      }
    });
  });
  return y;
}

// Returns (grad_u, grad_dt, grad_At, grad_B, grad_C, grad_D).
std::vector<at::Tensor> scan_bwd(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& At,
                                 const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                                 const at::Tensor& grad_y_) {
  check(u, dt, At, Bm, Cm, D);
  auto grad_y = grad_y_.contiguous();
  TORCH_CHECK(grad_y.sizes() == u.sizes() && grad_y.scalar_type() == u.scalar_type(), "grad_y must match u");
  const int64_t Bt = u.size(0), T = u.size(1), Di = u.size(2), N = At.size(0);
  auto gu = at::empty_like(u), gdt = at::empty_like(u);
  at::Tensor gA_part, gD_part, gB_part, gC_part;
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan_bwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const int64_t n_blocks = (Di + W - 1) / W, G = n_groups(Bt, n_blocks);
    gA_part = at::empty({Bt, N, Di}, u.options());
    gD_part = at::empty({Bt, Di}, u.options());
    gB_part = at::empty({Bt, G, T, N}, u.options());
    gC_part = at::empty({Bt, G, T, N}, u.options());
    const scalar_t *pu = u.data_ptr<scalar_t>(), *pdt = dt.data_ptr<scalar_t>(), *pA = At.data_ptr<scalar_t>(),
                   *pB = Bm.data_ptr<scalar_t>(), *pC = Cm.data_ptr<scalar_t>(), *pD = D.data_ptr<scalar_t>(),
                   *pgy = grad_y.data_ptr<scalar_t>();
    scalar_t *pgu = gu.data_ptr<scalar_t>(), *pgdt = gdt.data_ptr<scalar_t>(), *pgA = gA_part.data_ptr<scalar_t>(),
             *pgD = gD_part.data_ptr<scalar_t>(), *pgB = gB_part.data_ptr<scalar_t>(),
             *pgC = gC_part.data_ptr<scalar_t>();
    at::parallel_for(0, Bt * G, 1, [&](int64_t begin, int64_t end) {
      // per thread: states and decays of one channel block over time, the adjoint, and the
      // lane-wise (unreduced) sums for grad B and grad C of one work item
      std::vector<Vec> hs(T * N), das(T * N), accB(T * N), accC(T * N), a(N), g(N), gA(N);
      alignas(64) scalar_t lanes[W];
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / G, grp = item % G;
        const scalar_t *Bb = pB + b * T * N, *Cb = pC + b * T * N;
        std::fill(accB.begin(), accB.end(), Vec(0));
        std::fill(accC.begin(), accC.end(), Vec(0));
        for (int64_t blk = grp * n_blocks / G; blk < (grp + 1) * n_blocks / G; ++blk) {
          const int64_t d0 = blk * W, cnt = std::min(W, Di - d0);
          for (int64_t n = 0; n < N; ++n) { a[n] = load(pA + n * Di + d0, cnt); g[n] = Vec(0); gA[n] = Vec(0); }
          const Vec Dv = load(pD + d0, cnt);
          // recompute the states
          for (int64_t t = 0; t < T; ++t) {
            const int64_t off = (b * T + t) * Di + d0;
            const Vec dtv = load(pdt + off, cnt), x = dtv * load(pu + off, cnt);
            const scalar_t* Bt_ = Bb + t * N;
            Vec* hp = hs.data() + t * N;
            Vec* dp = das.data() + t * N;
            for (int64_t n = 0; n < N; ++n) {
              const Vec dA = (dtv * a[n]).exp();
              const Vec prev = t > 0 ? hp[n - N] : Vec(0);
              dp[n] = dA;
              hp[n] = at::vec::fmadd(dA, prev, x * Vec(Bt_[n]));
            }
          }
          // the adjoint g_t = dL/dh_t = C_t gy_t + exp(dt_{t+1} A) g_{t+1}, in reverse
          Vec gDv(0);
          for (int64_t t = T - 1; t >= 0; --t) {
            const int64_t off = (b * T + t) * Di + d0;
            const Vec dtv = load(pdt + off, cnt), uv = load(pu + off, cnt), gy = load(pgy + off, cnt);
            const Vec x = dtv * uv;
            const scalar_t *Bt_ = Bb + t * N, *Ct_ = Cb + t * N;
            const Vec* hp = hs.data() + t * N;
            const Vec* dp = das.data() + t * N;
            Vec* aB = accB.data() + t * N;
            Vec* aC = accC.data() + t * N;
            Vec gx(0), gdtv(0);
            for (int64_t n = 0; n < N; ++n) {
              aC[n] = at::vec::fmadd(gy, hp[n], aC[n]);
              const Vec gn = at::vec::fmadd(gy, Vec(Ct_[n]), g[n]);
              aB[n] = at::vec::fmadd(gn, x, aB[n]);
              gx = at::vec::fmadd(gn, Vec(Bt_[n]), gx);
              if (t > 0) {  // d/d(dt A) of exp(dt A) h_{t-1}
                const Vec s = gn * hp[n - N] * dp[n];
                gdtv = at::vec::fmadd(s, a[n], gdtv);
                gA[n] = at::vec::fmadd(s, dtv, gA[n]);
              }
              g[n] = gn * dp[n];
            }
            store(at::vec::fmadd(gx, dtv, gy * Dv), pgu + off, cnt);
            store(at::vec::fmadd(gx, uv, gdtv), pgdt + off, cnt);
            gDv = at::vec::fmadd(gy, uv, gDv);
          }
          for (int64_t n = 0; n < N; ++n) store(gA[n], pgA + (b * N + n) * Di + d0, cnt);
          store(gDv, pgD + b * Di + d0, cnt);
        }
        // lane sums (padding lanes hold zeros)
        scalar_t* oB = pgB + (b * G + grp) * T * N;
        scalar_t* oC = pgC + (b * G + grp) * T * N;
        for (int64_t i = 0; i < T * N; ++i) {
          accB[i].store(lanes);
          scalar_t s = 0;
          for (int64_t w = 0; w < W; ++w) s += lanes[w];
          oB[i] = s;
          accC[i].store(lanes);
          s = 0;
          for (int64_t w = 0; w < W; ++w) s += lanes[w];
          oC[i] = s;
        }
      }
    });
  });
  return {gu, gdt, gA_part.sum(0), gB_part.sum(1), gC_part.sum(1), gD_part.sum(0)};
}

}  // namespace

TORCH_LIBRARY(windtunnel_scan, m) {
  m.def("fwd(Tensor u, Tensor dt, Tensor At, Tensor B, Tensor C, Tensor D) -> Tensor");
  m.def("bwd(Tensor u, Tensor dt, Tensor At, Tensor B, Tensor C, Tensor D, Tensor grad_y) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(windtunnel_scan, CPU, m) {
  m.impl("fwd", &scan_fwd);
  m.impl("bwd", &scan_bwd);
}
