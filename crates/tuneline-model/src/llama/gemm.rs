//! Matrix products on slices, through the `gemm` crate that candle's CPU
//! matmul also uses, for the kernels that run many small products side by
//! side (one attention head per task): candle's batched matmul would split
//! each small product over all cores and wait between them.

use super::kernels::Real;

/// A matrix of `rows x cols` values in a slice, row-major unless transposed.
#[derive(Clone, Copy)]
pub struct Mat<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    row_stride: isize,
    col_stride: isize,
}

impl<'a, T> Mat<'a, T> {
    /// The row-major `rows x cols` matrix at the start of `data`.
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        assert!(data.len() >= rows * cols, "a {rows} x {cols} matrix in {} values", data.len());
        Self { data, rows, cols, row_stride: cols as isize, col_stride: 1 }
    }

    /// Its rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Its columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The transpose (a view of the same values).
    pub fn t(self) -> Self {
        Self { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }
}

/// `dst = lhs · rhs · scale`, plus `dst` when `accumulate`, with `dst` the
/// row-major `lhs.rows x rhs.cols` matrix at its start. Runs on this thread.
pub fn gemm<T: Real>(dst: &mut [T], lhs: Mat<T>, rhs: Mat<T>, scale: T, accumulate: bool) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert_eq!(rhs.rows, k, "inner dimensions");
    assert!(dst.len() >= m * n, "a {m} x {n} product in {} values", dst.len());
    // SAFETY: `Mat::new` checked that each operand's values lie in its slice
    // (a transpose reads the same values), and `dst` holds `m x n` values.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.col_stride,
            lhs.row_stride,
            rhs.data.as_ptr(),
            rhs.col_stride,
            rhs.row_stride,
            T::one(),
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}
