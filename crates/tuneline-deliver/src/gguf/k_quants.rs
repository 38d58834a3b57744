//! Q4_K and Q6_K blocks as llama-quantize makes them without an importance
//! matrix: ggml's `quantize_row_q4_K_ref` (`make_qkx2_quants`, a search over
//! 21 scales per 32 values) and `quantize_row_q6_K_ref` (`make_qx_quants`,
//! 19 scales per 16 values), with ggml's round-half-to-even `nearest_int`.
//!
//! candle's port uses the older `make_qkx1_quants` for Q4_K and libm's
//! `roundf`, and runs each small group's search alone: its additions form
//! one long dependent chain. Here the groups of a 256-value super-block are
//! searched side by side, one group per SIMD lane, so that the compiler
//! vectorizes across groups while each group's sums keep ggml's exact order.
//! They run compiled for the CPU's widest vectors ([`vectorized`]); Rust
//! never fuses a multiply and an add, so every CPU writes the same bytes.

use tuneline_model::llama::vectorized;

/// Values per super-block.
const QK_K: usize = 256;
/// Bytes of a Q4_K block: d, dmin, 12 bytes of 6-bit scales and mins, 128 of 4-bit values.
const Q4K_BYTES: usize = 144;
/// Bytes of a Q6_K block: 128 bytes of low nibbles, 64 of high bits, 16 scales, d.
const Q6K_BYTES: usize = 210;
/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below it is all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: `x` rounded half to even through the float
/// `1.5 * 2^23`, exact for `|x| <= 2^22` (the magnitudes quantization meets).
#[inline(always)]
fn nearest_int(x: f32) -> i32 {
    ((x + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// `values` as Q4_K blocks; `values.len()` is a multiple of 256.
pub fn quantize_q4_k(values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() / QK_K * Q4K_BYTES];
    vectorized(
        #[inline(always)]
        || {
            // Two blocks at a time: 16 groups fill an AVX-512 register.
            let mut pairs = values.chunks_exact(2 * QK_K);
            let mut outs = out.chunks_exact_mut(2 * Q4K_BYTES);
            for (x, y) in (&mut pairs).zip(&mut outs) {
                q4_k_blocks::<16>(x, y);
            }
            if !pairs.remainder().is_empty() {
                q4_k_blocks::<8>(pairs.remainder(), outs.into_remainder());
            }
        },
    );
    out
}

/// `values` as Q6_K blocks; `values.len()` is a multiple of 256.
pub fn quantize_q6_k(values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() / QK_K * Q6K_BYTES];
    vectorized(
        #[inline(always)]
        || {
            for (x, y) in values.chunks_exact(QK_K).zip(out.chunks_exact_mut(Q6K_BYTES)) {
                q6_k_block(x, y);
            }
        },
    );
    out
}

/// The 256 values `x` as groups of `N` side by side: `t[i][g] = x[N g + i]`.
#[inline(always)]
fn lanes<const N: usize, const G: usize>(x: &[f32]) -> [[f32; G]; N] {
    std::array::from_fn(|i| std::array::from_fn(|g| x[N * g + i]))
}

/// The Q4_K blocks of the `G / 8` blocks of values `x` into `y`, their
/// `G` groups of 32 searched side by side.
#[inline(always)]
fn q4_k_blocks<const G: usize>(x: &[f32], y: &mut [u8]) {
    let xt = lanes::<32, G>(x);
    let mut sum_x2 = [0f32; G];
    for row in &xt {
        for g in 0..G {
            sum_x2[g] += row[g] * row[g];
        }
    }
    let av_x = sum_x2.map(|s| (s / 32.0).sqrt());
    let w: [[f32; G]; 32] = xt.map(|row| std::array::from_fn(|g| av_x[g] + row[g].abs()));
    let (scales, mins, levels) = make_qkx2_quants(&xt, &w);
    for (b, (x, y)) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(Q4K_BYTES)).enumerate() {
        let groups = 8 * b..8 * b + 8;
        let l: [u8; QK_K] = std::array::from_fn(|k| levels[k % 32][8 * b + k / 32] as u8);
        q4_k_block(x, &scales[groups.clone()], &mins[groups], l, y);
    }
}

/// One Q4_K block of the 256 values `x` into `y`, from its 8 groups' `scales`,
/// `mins` and levels `l` as the search left them.
#[inline(always)]
fn q4_k_block(x: &[f32], scales: &[f32], mins: &[f32], mut l: [u8; QK_K], y: &mut [u8]) {
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for g in 0..8 {
        if scales[g] > max_scale {
            max_scale = scales[g];
        }
        if mins[g] > max_min {
            max_min = mins[g];
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for g in 0..8 {
        let ls = (nearest_int(inv_scale * scales[g]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[g]) as u8).min(63);
        if g < 4 {
            packed[g] = ls;
            packed[g + 4] = lm;
        } else {
            packed[g + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[g - 4] |= (ls >> 4) << 6;
            packed[g] |= (lm >> 4) << 6;
        }
    }
    let d = half::f16::from_f32(max_scale / 63.0);
    let dmin = half::f16::from_f32(max_min / 63.0);
    for g in 0..8 {
        let (sc, m) = scale_min_k4(g, &packed);
        let d = d.to_f32() * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for i in 0..32 {
            l[32 * g + i] = nearest_int((x[32 * g + i] + dm) / d).clamp(0, 15) as u8;
        }
    }
    y[0..2].copy_from_slice(&d.to_le_bytes());
    y[2..4].copy_from_slice(&dmin.to_le_bytes());
    y[4..16].copy_from_slice(&packed);
    for (q, j) in y[16..].chunks_exact_mut(32).zip((0..QK_K).step_by(64)) {
        for i in 0..32 {
            q[i] = l[j + i] | (l[j + i + 32] << 4);
        }
    }
}

/// ggml's `get_scale_min_k4`: group `j`'s 6-bit scale and min from the packed 12 bytes.
#[inline(always)]
fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// ggml's `make_qkx2_quants(32, 15, x, w, L, &min, Laux, -1, 0.1, 20, false)`
/// for `G` groups at once (`x[i][g]` is value `i` of group `g`): each group's
/// scale, its min negated, and its levels (0-15). A group's levels are those
/// of its best step, computed once at the end from that step's scale and min.
#[allow(clippy::needless_range_loop)] // lane loops, written so that they vectorize
#[inline(always)]
fn make_qkx2_quants<const G: usize>(
    x: &[[f32; G]; 32],
    w: &[[f32; G]; 32],
) -> ([f32; G], [f32; G], [[f32; G]; 32]) {
    const NMAX: f32 = 15.0;
    let (mut min, mut max, mut sum_w) = (x[0], x[0], w[0]);
    let mut sum_x: [f32; G] = std::array::from_fn(|g| w[0][g] * x[0][g]);
    for i in 1..32 {
        for g in 0..G {
            min[g] = if x[i][g] < min[g] { x[i][g] } else { min[g] };
            max[g] = if x[i][g] > max[g] { x[i][g] } else { max[g] };
            sum_w[g] += w[i][g];
            sum_x[g] += w[i][g] * x[i][g];
        }
    }
    min = min.map(|m| if m > 0.0 { 0.0 } else { m });
    // A constant group: all levels 0 and scale 0 (its sums below are discarded).
    let flat: [bool; G] = std::array::from_fn(|g| max[g] == min[g]);
    let flat_min = min;
    let iscale: [f32; G] = std::array::from_fn(|g| NMAX / (max[g] - min[g]));
    let mut scale: [f32; G] = iscale.map(|i| 1.0 / i);
    let mut best_error = [0f32; G];
    for i in 0..32 {
        for g in 0..G {
            let diff = scale[g] * level(iscale[g], x[i][g], min[g]) + min[g] - x[i][g];
            best_error[g] += w[i][g] * (diff * diff);
        }
    }
    // The scale and min the best levels were taken at.
    let (mut at_iscale, mut at_min) = (iscale, min);
    for step in 0..=20 {
        let factor = -1.0 + 0.1 * step as f32 + NMAX;
        let iscale: [f32; G] = std::array::from_fn(|g| factor / (max[g] - min[g]));
        let (mut sum_l, mut sum_l2, mut sum_xl) = ([0f32; G], [0f32; G], [0f32; G]);
        for i in 0..32 {
            for g in 0..G {
                let l = level(iscale[g], x[i][g], min[g]);
                let wl = w[i][g] * l;
                sum_l[g] += wl;
                sum_l2[g] += wl * l;
                sum_xl[g] += wl * x[i][g];
            }
        }
        let mut this_scale = [0f32; G];
        let mut this_min = [0f32; G];
        let mut solved = [false; G];
        for g in 0..G {
            let det = sum_w[g] * sum_l2[g] - sum_l[g] * sum_l[g];
            solved[g] = det > 0.0;
            let positive = (sum_l2[g] * sum_x[g] - sum_l[g] * sum_xl[g]) / det > 0.0;
            this_scale[g] = if positive {
                sum_xl[g] / sum_l2[g]
            } else {
                (sum_w[g] * sum_xl[g] - sum_x[g] * sum_l[g]) / det
            };
            this_min[g] =
                if positive { 0.0 } else { (sum_l2[g] * sum_x[g] - sum_l[g] * sum_xl[g]) / det };
        }
        let mut error = [0f32; G];
        for i in 0..32 {
            for g in 0..G {
                let l = level(iscale[g], x[i][g], min[g]);
                let diff = this_scale[g] * l + this_min[g] - x[i][g];
                error[g] += w[i][g] * (diff * diff);
            }
        }
        for g in 0..G {
            let better = solved[g] && error[g] < best_error[g];
            best_error[g] = if better { error[g] } else { best_error[g] };
            scale[g] = if better { this_scale[g] } else { scale[g] };
            at_iscale[g] = if better { iscale[g] } else { at_iscale[g] };
            at_min[g] = if better { min[g] } else { at_min[g] };
            min[g] = if better { this_min[g] } else { min[g] };
        }
    }
    let levels = x.map(|row| {
        std::array::from_fn(|g| if flat[g] { 0.0 } else { level(at_iscale[g], row[g], at_min[g]) })
    });
    for g in 0..G {
        scale[g] = if flat[g] { 0.0 } else { scale[g] };
        min[g] = if flat[g] { flat_min[g] } else { min[g] };
    }
    (scale, min.map(|m| -m), levels)
}

/// A value's Q4_K level (0-15) at `iscale` above `min`.
#[inline(always)]
fn level(iscale: f32, x: f32, min: f32) -> f32 {
    nearest_int(iscale * (x - min)).clamp(0, 15) as f32
}

/// One Q6_K block of the 256 values `x` into `y`.
#[inline(always)]
fn q6_k_block(x: &[f32], y: &mut [u8]) {
    let (scales, levels) = make_qx_quants(&lanes::<16, 16>(x));
    let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
    for &scale in &scales {
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        y.fill(0);
        return;
    }
    let iscale = -128.0 / max_scale;
    let d = half::f16::from_f32(1.0 / iscale);
    let packed: [i8; 16] = scales.map(|s| nearest_int(iscale * s).min(127) as i8);
    let mut l: [u8; QK_K] = std::array::from_fn(|k| levels[k % 16][k / 16] as u8);
    for (g, &sc) in packed.iter().enumerate() {
        let d = d.to_f32() * sc as f32;
        if d == 0.0 {
            continue;
        }
        for i in 0..16 {
            l[16 * g + i] = (nearest_int(x[16 * g + i] / d).clamp(-32, 31) + 32) as u8;
        }
    }
    let (ql, rest) = y.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    for ((ql, qh), j) in ql.chunks_exact_mut(64).zip(qh.chunks_exact_mut(32)).zip([0, 128]) {
        for i in 0..32 {
            let [a, b, c, e] = [0, 32, 64, 96].map(|o| l[j + i + o]);
            ql[i] = (a & 0xF) | ((c & 0xF) << 4);
            ql[i + 32] = (b & 0xF) | ((e & 0xF) << 4);
            qh[i] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
        }
    }
    rest[..16].copy_from_slice(&packed.map(|s| s as u8));
    rest[16..18].copy_from_slice(&d.to_le_bytes());
}

/// ggml's `make_qx_quants(16, 32, x, L, 1, NULL)` (weights x²) for 16
/// groups at once (`x[i][g]` is value `i` of group `g`): each group's scale
/// and its levels (0-63).
#[allow(clippy::needless_range_loop)] // lane loops, written so that they vectorize
#[inline(always)]
fn make_qx_quants(x: &[[f32; 16]; 16]) -> ([f32; 16], [[f32; 16]; 16]) {
    const NMAX: f32 = 32.0;
    let (mut max, mut amax) = ([0f32; 16], [0f32; 16]);
    for row in x {
        for g in 0..16 {
            let bigger = row[g].abs() > amax[g];
            amax[g] = if bigger { row[g].abs() } else { amax[g] };
            max[g] = if bigger { row[g] } else { max[g] };
        }
    }
    let mut best_iscale: [f32; 16] = std::array::from_fn(|g| -NMAX / max[g]);
    let (sum_lx, sum_l2) = qx_sums(x, &best_iscale);
    let mut scale: [f32; 16] =
        std::array::from_fn(|g| if sum_l2[g] != 0.0 { sum_lx[g] / sum_l2[g] } else { 0.0 });
    let mut best: [f32; 16] = std::array::from_fn(|g| scale[g] * sum_lx[g]);
    for step in (-9..=9).filter(|&s| s != 0) {
        let factor = NMAX + 0.1 * step as f32;
        let iscale: [f32; 16] = std::array::from_fn(|g| -factor / max[g]);
        let (sum_lx, sum_l2) = qx_sums(x, &iscale);
        for g in 0..16 {
            if sum_l2[g] > 0.0 && sum_lx[g] * sum_lx[g] > best[g] * sum_l2[g] {
                best_iscale[g] = iscale[g];
                scale[g] = sum_lx[g] / sum_l2[g];
                best[g] = scale[g] * sum_lx[g];
            }
        }
    }
    let levels = x.map(|row| {
        std::array::from_fn(|g| {
            if amax[g] < GROUP_MAX_EPS {
                0.0
            } else {
                (nearest_int(best_iscale[g] * row[g]).clamp(-32, 31) + 32) as f32
            }
        })
    });
    (std::array::from_fn(|g| if amax[g] < GROUP_MAX_EPS { 0.0 } else { scale[g] }), levels)
}

/// The sums of x² l x and x² l² of each group of `x`, for its levels at `iscale`.
#[allow(clippy::needless_range_loop)] // lane loops, written so that they vectorize
#[inline(always)]
fn qx_sums(x: &[[f32; 16]; 16], iscale: &[f32; 16]) -> ([f32; 16], [f32; 16]) {
    let (mut sum_lx, mut sum_l2) = ([0f32; 16], [0f32; 16]);
    for row in x {
        for g in 0..16 {
            let l = nearest_int(iscale[g] * row[g]).clamp(-32, 31) as f32;
            let w = row[g] * row[g];
            sum_lx[g] += w * row[g] * l;
            sum_l2[g] += w * l * l;
        }
    }
    (sum_lx, sum_l2)
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    /// Values like a model's weights: mostly small, some outliers, a zero
    /// block and a constant group.
    fn weights() -> Vec<f32> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut v: Vec<f32> = (0..256 * 64)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                u * if i % 97 == 0 { 0.5 } else { 0.05 }
            })
            .collect();
        v[..256].fill(0.0);
        v[256..288].fill(0.01);
        v
    }

    /// `values` quantized to `dtype` by candle.
    fn candle(values: &[f32], dtype: GgmlDType) -> QTensor {
        let t = Tensor::from_vec(values.to_vec(), values.len(), &Device::Cpu).unwrap();
        QTensor::quantize(&t, dtype).unwrap()
    }

    /// The relative RMS error of `bytes` (of `dtype`) against `values`, dequantized by candle.
    fn error(values: &[f32], dtype: GgmlDType, bytes: &[u8]) -> f32 {
        let storage = candle_core::quantized::QStorage::from_data(
            std::borrow::Cow::Borrowed(bytes),
            &Device::Cpu,
            dtype,
        )
        .unwrap();
        let shape = candle_core::Shape::from(values.len());
        let back = QTensor::new(storage, shape).unwrap().dequantize(&Device::Cpu).unwrap();
        let back = back.to_vec1::<f32>().unwrap();
        let (num, den) = values
            .iter()
            .zip(&back)
            .fold((0f32, 0f32), |(n, d), (a, b)| (n + (a - b) * (a - b), d + a * a));
        (num / den).sqrt()
    }

    /// The relative RMS errors of `ours` and of candle's own blocks of `dtype` for `values`.
    fn errors(values: &[f32], dtype: GgmlDType, ours: &[u8]) -> (f32, f32) {
        let theirs = candle(values, dtype).data().unwrap().into_owned();
        (error(values, dtype, ours), error(values, dtype, &theirs))
    }

    #[test]
    fn nearest_int_rounds_half_to_even() {
        let cases = [(0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (3.49, 3), (-7.7, -8)];
        for (x, want) in cases {
            assert_eq!(super::nearest_int(x), want, "{x}");
        }
    }

    // Byte equality with llama-quantize is held by the delivery tests (`families`).
    #[test]
    fn q6_k_blocks_decode_as_closely_as_candles_port() {
        let values = weights();
        let ours = super::quantize_q6_k(&values);
        let (e_ours, e_candle) = errors(&values, GgmlDType::Q6K, &ours);
        assert!(e_ours < 0.05 && e_ours <= e_candle, "ours {e_ours}, candle's {e_candle}");
        assert!(ours[..super::Q6K_BYTES].iter().all(|&b| b == 0));
    }

    #[test]
    fn q4_k_blocks_decode_closer_than_candles_older_search() {
        let values = weights();
        let ours = super::quantize_q4_k(&values);
        let (e_ours, e_candle) = errors(&values, GgmlDType::Q4K, &ours);
        assert!(e_ours < 0.1 && e_ours <= e_candle, "ours {e_ours}, candle's {e_candle}");
        // The zero block is all zero bytes.
        assert!(ours[..super::Q4K_BYTES].iter().all(|&b| b == 0));
    }
}
