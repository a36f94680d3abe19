// Mamba-1 selective scan on the CPU, with its input and output elementwise steps fused:
//   dt = softplus(dt_raw) (optional), h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t,
//   y_t = C_t . h_t + D u_t, out_t = y_t * silu(z_t) (optional gate).
//
// Built on first use by windtunnel.models.scan_ext (torch.utils.cpp_extension), with OpenMP so that
// ATen's parallel_for uses torch's threads. The states of one batch row and a chunk of channel
// blocks live in a small buffer, stepped through time together so that each step's loads are
// contiguous runs of channels; the (T, B, D_inner, N) tensors of the pure-PyTorch scan are never
// made. The forward saves nothing beyond its inputs; the backward recomputes the states of one
// chunk into a T x chunk x N buffer that stays in L2 and runs the adjoint recurrence over it in
// reverse, producing every gradient in one pass. The decays exp(dt A) use ATen's polynomial
// exp_u20 (a few ulp; the scan's cost is mostly these exponentials).
// Channels are the vector lanes (contiguous in u, dt, z, out); B_t, C_t are broadcast scalars.
// Work is split over (batch row, channel group); each item writes its own slots of the partial
// sums, so results do not depend on the number of threads.
//
// Shapes (one dtype): u, dt (Bt, T, Di) contiguous; At = A transposed (N, Di) contiguous;
// B, C (Bt, T, N) and z (Bt, T, Di) with unit last stride (views into the projections' outputs);
// D (Di). An undefined z means no gate.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <optional>
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

template <typename scalar_t>
inline Vectorized<scalar_t> sigmoid(const Vectorized<scalar_t>& v) {
  const Vectorized<scalar_t> one(1);
  return one / (one + v.neg().exp());
}

template <typename scalar_t>
inline scalar_t hsum(const Vectorized<scalar_t>& v) {
  alignas(64) scalar_t lanes[Vectorized<scalar_t>::size()];
  v.store(lanes);
  scalar_t s = 0;
  for (int64_t i = 0; i < Vectorized<scalar_t>::size(); ++i) s += lanes[i];
  return s;
}

// softplus as torch computes it (beta 1, threshold 20), and its derivative sigmoid(x)
template <typename scalar_t>
inline void softplus(const Vectorized<scalar_t>& x, Vectorized<scalar_t>& sp, Vectorized<scalar_t>& sig) {
  using Vec = Vectorized<scalar_t>;
  const Vec e = x.exp(), one(1), big = x > Vec(20);
  sp = Vec::blendv(e.log1p(), x, big);
  sig = Vec::blendv(e / (e + one), one, big);
}

// Channel blocks stepped together through time: the loads at one time step are contiguous runs of
// kChunk * W channels, and the backward's saved states of one chunk (2 T kChunk N vectors) stay in L2.
constexpr int64_t kChunk = 16;

// Channel groups per batch row: enough work items to keep a few threads busy at small batch,
// a function of the shapes only (never of the thread count), so that sums are reproducible.
inline int64_t n_groups(int64_t batch, int64_t n_blocks) {
  return std::max<int64_t>(1, std::min<int64_t>(n_blocks, (64 + batch - 1) / batch));
}

struct Rows {  // a (Bt, T, k) tensor with unit last stride
  int64_t sb, st;
  Rows(const at::Tensor& x) : sb(x.stride(0)), st(x.stride(1)) {}
  int64_t at(int64_t b, int64_t t) const { return b * sb + t * st; }
};

void check(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& At, const at::Tensor& Bm,
           const at::Tensor& Cm, const at::Tensor& D, const std::optional<at::Tensor>& z) {
  TORCH_CHECK(u.dim() == 3 && dt.sizes() == u.sizes(), "u, dt must be (batch, T, d_inner)");
  TORCH_CHECK(At.dim() == 2 && At.size(1) == u.size(2), "At must be (d_state, d_inner)");
  TORCH_CHECK(Bm.dim() == 3 && Bm.size(0) == u.size(0) && Bm.size(1) == u.size(1) && Bm.size(2) == At.size(0),
              "B must be (batch, T, d_state)");
  TORCH_CHECK(Cm.sizes() == Bm.sizes(), "C must be (batch, T, d_state)");
  TORCH_CHECK(D.dim() == 1 && D.size(0) == u.size(2), "D must be (d_inner,)");
  for (const auto* x : {&u, &dt, &At, &D}) {
    TORCH_CHECK(x->device().is_cpu() && x->is_contiguous() && x->scalar_type() == u.scalar_type(),
                "selective scan: u, dt, At, D must be contiguous CPU tensors of one dtype");
  }
  for (const auto* x : {&Bm, &Cm}) {
    TORCH_CHECK(x->device().is_cpu() && x->stride(2) == 1 && x->scalar_type() == u.scalar_type(),
                "selective scan: B, C must be CPU tensors with unit last stride, of u's dtype");
  }
  if (z) {
    TORCH_CHECK(z->sizes() == u.sizes() && z->stride(2) == 1 && z->device().is_cpu() &&
                z->scalar_type() == u.scalar_type(), "selective scan: z must be like u, with unit last stride");
  }
}

at::Tensor scan_fwd(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& At, const at::Tensor& Bm,
                    const at::Tensor& Cm, const at::Tensor& D, const std::optional<at::Tensor>& z,
                    bool dt_softplus) {
  check(u, dt, At, Bm, Cm, D, z);
  const int64_t Bt = u.size(0), T = u.size(1), Di = u.size(2), N = At.size(0);
  auto y = at::empty_like(u);
  const Rows rB(Bm), rC(Cm), rZ(z ? *z : u);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan_fwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const int64_t n_blocks = (Di + W - 1) / W, G = n_groups(Bt, n_blocks);
    const scalar_t *pu = u.data_ptr<scalar_t>(), *pdt = dt.data_ptr<scalar_t>(), *pA = At.data_ptr<scalar_t>(),
                   *pB = Bm.data_ptr<scalar_t>(), *pC = Cm.data_ptr<scalar_t>(), *pD = D.data_ptr<scalar_t>(),
                   *pz = z ? z->data_ptr<scalar_t>() : nullptr;
    scalar_t* py = y.data_ptr<scalar_t>();
    at::parallel_for(0, Bt * G, 1, [&](int64_t begin, int64_t end) {
      std::vector<Vec> h(kChunk * N), a(kChunk * N), bv(N), cv(N);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / G, g = item % G, blk_end = (g + 1) * n_blocks / G;
        for (int64_t c0 = g * n_blocks / G; c0 < blk_end; c0 += kChunk) {
          const int64_t nb = std::min(kChunk, blk_end - c0);
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
            for (int64_t n = 0; n < N; ++n) { a[j * N + n] = load(pA + n * Di + d0, cnt); h[j * N + n] = Vec(0); }
          }
          for (int64_t t = 0; t < T; ++t) {
            const scalar_t *Bt_ = pB + rB.at(b, t), *Ct_ = pC + rC.at(b, t);
            for (int64_t n = 0; n < N; ++n) { bv[n] = Vec(Bt_[n]); cv[n] = Vec(Ct_[n]); }
            for (int64_t j = 0; j < nb; ++j) {
              const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0), off = (b * T + t) * Di + d0;
              Vec dtv = load(pdt + off, cnt), sig;
              if (dt_softplus) softplus(Vec(dtv), dtv, sig);
              const Vec uv = load(pu + off, cnt), x = dtv * uv;
              Vec* hj = h.data() + j * N;
              const Vec* aj = a.data() + j * N;
              Vec acc = load(pD + d0, cnt) * uv;
              for (int64_t n = 0; n < N; ++n) {
                hj[n] = at::vec::fmadd((dtv * aj[n]).exp_u20(), hj[n], x * bv[n]);
                acc = at::vec::fmadd(hj[n], cv[n], acc);
              }
              if (pz) {
                const Vec zv = load(pz + rZ.at(b, t) + d0, cnt);
                acc = acc * zv * sigmoid(zv);
              }
              store(acc, py + off, cnt);
            }
          }
        }
      }
    });
  });
  return y;
}

// Returns (grad_u, grad_dt (of dt_raw when dt_softplus), grad_At, grad_B, grad_C, grad_D, grad_z
// (empty without a gate)).
std::vector<at::Tensor> scan_bwd(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& At,
                                 const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                                 const std::optional<at::Tensor>& z, bool dt_softplus, const at::Tensor& grad_y_) {
  check(u, dt, At, Bm, Cm, D, z);
  auto grad_y = grad_y_.contiguous();
  TORCH_CHECK(grad_y.sizes() == u.sizes() && grad_y.scalar_type() == u.scalar_type(), "grad_y must match u");
  const int64_t Bt = u.size(0), T = u.size(1), Di = u.size(2), N = At.size(0);
  auto gu = at::empty_like(u), gdt = at::empty_like(u);
  auto gz = z ? at::empty_like(u) : at::empty({0}, u.options());
  const Rows rB(Bm), rC(Cm), rZ(z ? *z : u);
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
                   *pz = z ? z->data_ptr<scalar_t>() : nullptr, *pgy = grad_y.data_ptr<scalar_t>();
    scalar_t *pgu = gu.data_ptr<scalar_t>(), *pgdt = gdt.data_ptr<scalar_t>(), *pgA = gA_part.data_ptr<scalar_t>(),
             *pgD = gD_part.data_ptr<scalar_t>(), *pgB = gB_part.data_ptr<scalar_t>(),
             *pgC = gC_part.data_ptr<scalar_t>(), *pgz = z ? gz.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, Bt * G, 1, [&](int64_t begin, int64_t end) {
      // per thread, for one chunk of channel blocks over all time steps: states and decays, dt
      // (after softplus), its derivative and the pre-gate output; the adjoint and grad A, D per
      // block; and the lane-wise (unreduced) sums for grad B and grad C of one work item
      const int64_t K = kChunk * N;
      std::vector<Vec> hs(T * K), das(T * K), dts(T * kChunk), sigs(T * kChunk), ys(T * kChunk), a(K), g(K), gA(K),
          gD(kChunk), accB(T * N), accC(T * N), bv(N), cv(N);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / G, grp = item % G, blk_end = (grp + 1) * n_blocks / G;
        std::fill(accB.begin(), accB.end(), Vec(0));
        std::fill(accC.begin(), accC.end(), Vec(0));
        for (int64_t c0 = grp * n_blocks / G; c0 < blk_end; c0 += kChunk) {
          const int64_t nb = std::min(kChunk, blk_end - c0);
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
            for (int64_t n = 0; n < N; ++n) {
              a[j * N + n] = load(pA + n * Di + d0, cnt);
              g[j * N + n] = Vec(0);
              gA[j * N + n] = Vec(0);
            }
            gD[j] = Vec(0);
          }
          // recompute the states (and the pre-gate output when gated)
          for (int64_t t = 0; t < T; ++t) {
            const scalar_t *Bt_ = pB + rB.at(b, t), *Ct_ = pC + rC.at(b, t);
            for (int64_t n = 0; n < N; ++n) { bv[n] = Vec(Bt_[n]); cv[n] = Vec(Ct_[n]); }
            for (int64_t j = 0; j < nb; ++j) {
              const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0), off = (b * T + t) * Di + d0;
              Vec dtv = load(pdt + off, cnt), sig;
              if (dt_softplus) softplus(Vec(dtv), dtv, sig);
              dts[t * kChunk + j] = dtv;
              sigs[t * kChunk + j] = sig;
              const Vec uv = load(pu + off, cnt), x = dtv * uv;
              const Vec* aj = a.data() + j * N;
              Vec* hp = hs.data() + t * K + j * N;
              Vec* dp = das.data() + t * K + j * N;
              Vec acc = pz ? load(pD + d0, cnt) * uv : Vec(0);
              for (int64_t n = 0; n < N; ++n) {
                const Vec dA = (dtv * aj[n]).exp_u20();
                const Vec prev = t > 0 ? hp[n - K] : Vec(0);
                dp[n] = dA;
                hp[n] = at::vec::fmadd(dA, prev, x * bv[n]);
                if (pz) acc = at::vec::fmadd(hp[n], cv[n], acc);
              }
              if (pz) ys[t * kChunk + j] = acc;
            }
          }
          // the adjoint g_t = dL/dh_t = C_t gy_t + exp(dt_{t+1} A) g_{t+1}, in reverse
          for (int64_t t = T - 1; t >= 0; --t) {
            const scalar_t *Bt_ = pB + rB.at(b, t), *Ct_ = pC + rC.at(b, t);
            for (int64_t n = 0; n < N; ++n) { bv[n] = Vec(Bt_[n]); cv[n] = Vec(Ct_[n]); }
            Vec* aB = accB.data() + t * N;
            Vec* aC = accC.data() + t * N;
            for (int64_t j = 0; j < nb; ++j) {
              const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0), off = (b * T + t) * Di + d0;
              const Vec dtv = dts[t * kChunk + j], uv = load(pu + off, cnt);
              Vec gy = load(pgy + off, cnt);
              if (pz) {  // out = y silu(z)
                const Vec zv = load(pz + rZ.at(b, t) + d0, cnt), sz = sigmoid(zv), one(1);
                store(gy * ys[t * kChunk + j] * sz * at::vec::fmadd(zv, one - sz, one), pgz + off, cnt);
                gy = gy * zv * sz;
              }
              const Vec x = dtv * uv;
              const Vec* hp = hs.data() + t * K + j * N;
              const Vec* dp = das.data() + t * K + j * N;
              const Vec* aj = a.data() + j * N;
              Vec* gj = g.data() + j * N;
              Vec* gAj = gA.data() + j * N;
              Vec gx(0), gdtv(0);
              for (int64_t n = 0; n < N; ++n) {
                aC[n] = at::vec::fmadd(gy, hp[n], aC[n]);
                const Vec gn = at::vec::fmadd(gy, cv[n], gj[n]);
                aB[n] = at::vec::fmadd(gn, x, aB[n]);
                gx = at::vec::fmadd(gn, bv[n], gx);
                if (t > 0) {  // d/d(dt A) of exp(dt A) h_{t-1}
                  const Vec s = gn * hp[n - K] * dp[n];
                  gdtv = at::vec::fmadd(s, aj[n], gdtv);
                  gAj[n] = at::vec::fmadd(s, dtv, gAj[n]);
                }
                gj[n] = gn * dp[n];
              }
              store(at::vec::fmadd(gx, dtv, gy * load(pD + d0, cnt)), pgu + off, cnt);
              gdtv = at::vec::fmadd(gx, uv, gdtv);
              store(dt_softplus ? gdtv * sigs[t * kChunk + j] : gdtv, pgdt + off, cnt);
              gD[j] = at::vec::fmadd(gy, uv, gD[j]);
            }
          }
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
            for (int64_t n = 0; n < N; ++n) store(gA[j * N + n], pgA + (b * N + n) * Di + d0, cnt);
            store(gD[j], pgD + b * Di + d0, cnt);
          }
        }
        // lane sums (padding lanes hold zeros)
        scalar_t* oB = pgB + (b * G + grp) * T * N;
        scalar_t* oC = pgC + (b * G + grp) * T * N;
        for (int64_t i = 0; i < T * N; ++i) {
          oB[i] = hsum(accB[i]);
          oC[i] = hsum(accC[i]);
        }
      }
    });
  });
  const int64_t G = gB_part.size(1);
  auto gB = G == 1 ? gB_part.view({Bt, T, N}) : gB_part.sum(1);
  auto gC = G == 1 ? gC_part.view({Bt, T, N}) : gC_part.sum(1);
  return {gu, gdt, gA_part.sum(0), gB, gC, gD_part.sum(0), gz};
}


// ---------------------------------------------------------------------------------------------
// Depthwise causal conv1d + SiLU: out[b,t,d] = silu(bias[d] + sum_k w[k,d] x[b, t+k-(K-1), d]),
// x (Bt, T, Di) with unit channel stride (any row strides: a view into in_proj's output),
// w transposed to (K, Di), bias (Di). Shifted multiply-adds over channel vectors.
// ---------------------------------------------------------------------------------------------

void check_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1, "conv: x must be (batch, T, d_inner) with unit channel stride");
  TORCH_CHECK(w.dim() == 2 && w.size(1) == x.size(2) && w.is_contiguous(), "conv: w must be (K, d_inner)");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(2) && bias.is_contiguous(), "conv: bias must be (d_inner,)");
  TORCH_CHECK(x.device().is_cpu() && w.scalar_type() == x.scalar_type() && bias.scalar_type() == x.scalar_type(),
              "conv: CPU tensors of one dtype");
}

at::Tensor conv_silu_fwd(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  check_conv(x, w, bias);
  const int64_t Bt = x.size(0), T = x.size(1), Di = x.size(2), K = w.size(0);
  const int64_t sb = x.stride(0), st = x.stride(1);
  auto out = at::empty({Bt, T, Di}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_silu_fwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const int64_t n_blocks = (Di + W - 1) / W, n_chunks = (n_blocks + kChunk - 1) / kChunk;
    const scalar_t *px = x.data_ptr<scalar_t>(), *pw = w.data_ptr<scalar_t>(), *pb = bias.data_ptr<scalar_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    at::parallel_for(0, Bt * n_chunks, 1, [&](int64_t begin, int64_t end) {
      std::vector<Vec> wv(kChunk * K), bv(kChunk);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / n_chunks, c0 = (item % n_chunks) * kChunk, nb = std::min(kChunk, n_blocks - c0);
        for (int64_t j = 0; j < nb; ++j) {
          const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
          for (int64_t k = 0; k < K; ++k) wv[j * K + k] = load(pw + k * Di + d0, cnt);
          bv[j] = load(pb + d0, cnt);
        }
        const scalar_t* xb = px + b * sb;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t k0 = std::max<int64_t>(0, K - 1 - t);
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
            Vec acc = bv[j];
            for (int64_t k = k0; k < K; ++k)
              acc = at::vec::fmadd(wv[j * K + k], load(xb + (t + k - (K - 1)) * st + d0, cnt), acc);
            store(acc * sigmoid(acc), po + (b * T + t) * Di + d0, cnt);
          }
        }
      }
    });
  });
  return out;
}

// Returns (grad_x (Bt, T, Di), grad_w (K, Di), grad_bias (Di)).
std::vector<at::Tensor> conv_silu_bwd(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                                      const at::Tensor& grad_out_) {
  check_conv(x, w, bias);
  auto grad_out = grad_out_.contiguous();
  const int64_t Bt = x.size(0), T = x.size(1), Di = x.size(2), K = w.size(0);
  TORCH_CHECK(grad_out.dim() == 3 && grad_out.size(0) == Bt && grad_out.size(1) == T && grad_out.size(2) == Di,
              "conv: grad_out must be (batch, T, d_inner)");
  const int64_t sb = x.stride(0), st = x.stride(1);
  auto gx = at::empty({Bt, T, Di}, x.options());
  auto gwb = at::empty({Bt, K + 1, Di}, x.options());  // per batch row: grad w, then grad bias
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_silu_bwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const int64_t n_blocks = (Di + W - 1) / W, n_chunks = (n_blocks + kChunk - 1) / kChunk;
    const scalar_t *px = x.data_ptr<scalar_t>(), *pw = w.data_ptr<scalar_t>(), *pb = bias.data_ptr<scalar_t>(),
                   *pgo = grad_out.data_ptr<scalar_t>();
    scalar_t *pgx = gx.data_ptr<scalar_t>(), *pgwb = gwb.data_ptr<scalar_t>();
    at::parallel_for(0, Bt * n_chunks, 1, [&](int64_t begin, int64_t end) {
      // per block of the chunk: its weights, grad w and grad bias, and a ring of the grad of the
      // pre-activation at t .. t+K-1
      std::vector<Vec> wv(kChunk * K), gw(kChunk * (K + 1)), gp(kChunk * K), bv(kChunk);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / n_chunks, c0 = (item % n_chunks) * kChunk, nb = std::min(kChunk, n_blocks - c0);
        for (int64_t j = 0; j < nb; ++j) {
          const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
          for (int64_t k = 0; k < K; ++k) { wv[j * K + k] = load(pw + k * Di + d0, cnt); gp[j * K + k] = Vec(0); }
          for (int64_t k = 0; k <= K; ++k) gw[j * (K + 1) + k] = Vec(0);
          bv[j] = load(pb + d0, cnt);
        }
        const scalar_t* xb = px + b * sb;
        const Vec one(1);
        for (int64_t t = T - 1; t >= 0; --t) {
          const int64_t k0 = std::max<int64_t>(0, K - 1 - t);
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
            const Vec* wj = wv.data() + j * K;
            Vec* gpj = gp.data() + j * K;
            Vec* gwj = gw.data() + j * (K + 1);
            Vec acc = bv[j];
            for (int64_t k = k0; k < K; ++k) acc = at::vec::fmadd(wj[k], load(xb + (t + k - (K - 1)) * st + d0, cnt), acc);
            const Vec sg = sigmoid(acc);
            const Vec g = load(pgo + (b * T + t) * Di + d0, cnt) * sg * at::vec::fmadd(acc, one - sg, one);
            // gpj[i] holds grad pre at time t + i; shift in the new one
            for (int64_t i = K - 1; i > 0; --i) gpj[i] = gpj[i - 1];
            gpj[0] = g;
            Vec gxv(0);  // x_t feeds out_{t+i} through w[K-1-i]
            for (int64_t i = 0; i < K; ++i) gxv = at::vec::fmadd(wj[K - 1 - i], gpj[i], gxv);
            store(gxv, pgx + (b * T + t) * Di + d0, cnt);
            for (int64_t k = k0; k < K; ++k) gwj[k] = at::vec::fmadd(g, load(xb + (t + k - (K - 1)) * st + d0, cnt), gwj[k]);
            gwj[K] = gwj[K] + g;
          }
        }
        for (int64_t j = 0; j < nb; ++j) {
          const int64_t d0 = (c0 + j) * W, cnt = std::min(W, Di - d0);
          for (int64_t k = 0; k <= K; ++k) store(gw[j * (K + 1) + k], pgwb + (b * (K + 1) + k) * Di + d0, cnt);
        }
      }
    });
  });
  auto gsum = gwb.sum(0);
  return {gx, gsum.narrow(0, 0, K).contiguous(), gsum[K].contiguous()};
}


// ---------------------------------------------------------------------------------------------
// RMSNorm over the last dimension: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
// x (R, d) contiguous. The forward also returns rstd (R) for the backward. Rows are split into
// fixed blocks (not per thread) so that grad w sums in the same order on any thread count.
// ---------------------------------------------------------------------------------------------
constexpr int64_t kRowBlock = 64;

std::vector<at::Tensor> rms_norm_fwd(const at::Tensor& x, const at::Tensor& w, double eps) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && w.dim() == 1 && w.size(0) == x.size(1) && w.is_contiguous() &&
              x.scalar_type() == w.scalar_type() && x.device().is_cpu(), "rms_norm: x (rows, d), w (d)");
  const int64_t R = x.size(0), d = x.size(1);
  auto y = at::empty_like(x);
  auto rstd = at::empty({R}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm_fwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const scalar_t *px = x.data_ptr<scalar_t>(), *pw = w.data_ptr<scalar_t>();
    scalar_t *py = y.data_ptr<scalar_t>(), *pr = rstd.data_ptr<scalar_t>();
    at::parallel_for(0, R, kRowBlock, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* xr = px + r * d;
        Vec ss(0);
        for (int64_t i = 0; i < d; i += W) {
          const Vec v = load(xr + i, std::min(W, d - i));
          ss = at::vec::fmadd(v, v, ss);
        }
        const scalar_t rs = scalar_t(1) / std::sqrt(hsum(ss) / scalar_t(d) + scalar_t(eps));
        pr[r] = rs;
        const Vec rv(rs);
        for (int64_t i = 0; i < d; i += W) {
          const int64_t c = std::min(W, d - i);
          store(load(xr + i, c) * rv * load(pw + i, c), py + r * d + i, c);
        }
      }
    });
  });
  return {y, rstd};
}

// Returns (grad_x, grad_w).
std::vector<at::Tensor> rms_norm_bwd(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rstd,
                                     const at::Tensor& grad_y_) {
  auto gy = grad_y_.contiguous();
  TORCH_CHECK(gy.sizes() == x.sizes() && gy.scalar_type() == x.scalar_type(), "rms_norm: grad_y must match x");
  const int64_t R = x.size(0), d = x.size(1), n_blk = (R + kRowBlock - 1) / kRowBlock;
  auto gx = at::empty_like(x);
  auto gw_part = at::empty({n_blk, d}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm_bwd", [&] {
    using Vec = Vectorized<scalar_t>;
    constexpr int64_t W = Vec::size();
    const scalar_t *px = x.data_ptr<scalar_t>(), *pw = w.data_ptr<scalar_t>(), *pr = rstd.data_ptr<scalar_t>(),
                   *pgy = gy.data_ptr<scalar_t>();
    scalar_t *pgx = gx.data_ptr<scalar_t>(), *pgw = gw_part.data_ptr<scalar_t>();
    at::parallel_for(0, n_blk, 1, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        scalar_t* gw = pgw + blk * d;
        std::fill(gw, gw + d, scalar_t(0));
        for (int64_t r = blk * kRowBlock; r < std::min(R, (blk + 1) * kRowBlock); ++r) {
          const scalar_t *xr = px + r * d, *gr = pgy + r * d;
          const Vec rv(pr[r]);
          Vec dot(0);
          for (int64_t i = 0; i < d; i += W) {
            const int64_t c = std::min(W, d - i);
            const Vec xv = load(xr + i, c), gv = load(gr + i, c);
            dot = at::vec::fmadd(gv * load(pw + i, c), xv, dot);
            store(at::vec::fmadd(gv * xv, rv, load(gw + i, c)), gw + i, c);
          }
          const scalar_t rs = pr[r];
          const Vec k(hsum(dot) * rs * rs * rs / scalar_t(d));
          for (int64_t i = 0; i < d; i += W) {
            const int64_t c = std::min(W, d - i);
            store(load(gr + i, c) * load(pw + i, c) * rv - load(xr + i, c) * k, pgx + r * d + i, c);
          }
        }
      }
    });
  });
  return {gx, gw_part.sum(0)};
}

// The number of threads ATen's parallel_for uses in this library: torch's thread count when it was
// built with OpenMP, 1 without (parallel_for then runs serially).
int64_t threads_used() {
  std::atomic<int64_t> n{0};
  at::parallel_for(0, 1024, 1, [&](int64_t, int64_t) { n.fetch_add(1); });
  return n.load();
}

}  // namespace

TORCH_LIBRARY(windtunnel_scan, m) {
  m.def("fwd(Tensor u, Tensor dt, Tensor At, Tensor B, Tensor C, Tensor D, Tensor? z, bool dt_softplus) -> Tensor");
  m.def("bwd(Tensor u, Tensor dt, Tensor At, Tensor B, Tensor C, Tensor D, Tensor? z, bool dt_softplus, Tensor grad_y) -> Tensor[]");
  m.def("conv_silu_fwd(Tensor x, Tensor w, Tensor bias) -> Tensor");
  m.def("conv_silu_bwd(Tensor x, Tensor w, Tensor bias, Tensor grad_out) -> Tensor[]");
  m.def("rms_norm_fwd(Tensor x, Tensor w, float eps) -> Tensor[]");
  m.def("rms_norm_bwd(Tensor x, Tensor w, Tensor rstd, Tensor grad_y) -> Tensor[]");
  m.def("threads_used() -> int", &threads_used);
}

TORCH_LIBRARY_IMPL(windtunnel_scan, CPU, m) {
  m.impl("fwd", &scan_fwd);
  m.impl("bwd", &scan_bwd);
  m.impl("conv_silu_fwd", &conv_silu_fwd);
  m.impl("conv_silu_bwd", &conv_silu_bwd);
  m.impl("rms_norm_fwd", &rms_norm_fwd);
  m.impl("rms_norm_bwd", &rms_norm_bwd);
}
