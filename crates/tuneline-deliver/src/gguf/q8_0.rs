//! Q8_0 blocks, as ggml's reference `quantize_row_q8_0_ref` makes them: per
//! 32 values, the scale `d = max|x| / 127` as an f16 and `round(x / d)` as
//! 32 signed bytes. candle's port calls libm's `roundf` per value; this one
//! rounds with a truncating cast, exactly as `roundf` does for these
//! magnitudes, which lets the compiler vectorize it: a q8_0 export spends
//! most of its time here.

/// Values per block.
const BLOCK: usize = 32;

/// `values` as Q8_0 blocks (34 bytes per 32 values); `values.len()` is a multiple of 32.
pub fn quantize(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() / BLOCK * (2 + BLOCK));
    for block in values.chunks_exact(BLOCK) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&half::f16::from_f32(d).to_le_bytes());
        out.extend(block.iter().map(|&v| round(v * id) as u8));
    }
    out
}

/// `roundf` (halves away from zero) for `|x| < 2^23`, where `x - trunc(x)` is exact.
fn round(x: f32) -> i8 {
    let t = x as i32;
    let frac = x - t as f32;
    (t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5)) as i8
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    #[test]
    fn blocks_equal_candles_port_of_ggml_byte_for_byte() {
        // Halves, ties at both signs, zeros, an all-zero block, and a wide range of magnitudes.
        let mut values: Vec<f32> =
            (0..32 * 64).map(|i| ((i as f32) * 0.7351).sin() * 10f32.powi(i % 7 - 3)).collect();
        values[..32].fill(0.0);
        values[32..64].iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 16.0) * 0.5);
        let t = Tensor::from_vec(values.clone(), (64, 32), &Device::Cpu).unwrap();
        let candle = QTensor::quantize(&t, GgmlDType::Q8_0).unwrap().data().unwrap().into_owned();
        assert_eq!(super::quantize(&values), candle);
    }

    #[test]
    fn rounding_is_roundf() {
        for x in
            [-127.0f32, -2.5, -1.5, -0.5, -0.49999997, 0.0, 0.49999997, 0.5, 1.5, 2.5, 126.5, 127.0]
        {
            assert_eq!(super::round(x), x.round() as i8, "{x}");
        }
    }
}
