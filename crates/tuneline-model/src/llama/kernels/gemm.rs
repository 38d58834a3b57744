//! Matrix products on slices, through the `gemm` crate that candle's CPU
//! matmul also uses, for the kernels that run many small products side by
//! side (one attention head per task): candle's batched matmul would split
//! each small product over all cores and wait between them.

use std::mem::MaybeUninit;

use super::real::Real;

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

    /// Rows of the matrix: its output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix: its input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The transpose (a view of the same values).
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }
}

/// `dst = lhs · rhs · scale`, plus `dst` when `accumulate`, with `dst` the
/// row-major `lhs.rows x rhs.cols` matrix at its start. Runs on this thread.
pub fn gemm<T: Real>(dst: &mut [T], lhs: Mat<T>, rhs: Mat<T>, scale: T, accumulate: bool) {
    assert!(
        dst.len() >= lhs.rows * rhs.cols,
        "a {} x {} product in {} values",
        lhs.rows,
        rhs.cols,
        dst.len()
    );
    // SAFETY: `dst` holds the product's values, and they are initialized.
    unsafe { product(dst.as_mut_ptr(), lhs, rhs, scale, accumulate) }
}

/// `lhs · rhs · scale` written into the start of `dst`, whose values need
/// not be initialized; returns the product's values.
pub fn gemm_into<'d, T: Real>(
    dst: &'d mut [MaybeUninit<T>],
    lhs: Mat<T>,
    rhs: Mat<T>,
    scale: T,
) -> &'d mut [T] {
    let dst = &mut dst[..lhs.rows * rhs.cols];
    if lhs.cols == 0 {
        dst.iter_mut().for_each(|v| _ = v.write(T::zero()));
    } else {
        // SAFETY: `dst` holds the product's values; without `accumulate` none is read.
        unsafe { product(dst.as_mut_ptr().cast(), lhs, rhs, scale, false) }
    }
    // SAFETY: every value was written, by the product (with an inner
    // dimension, gemm writes each value of its output) or as a zero.
    unsafe { &mut *(dst as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// The product through the `gemm` crate.
///
/// # Safety
/// `dst` must point to `lhs.rows x rhs.cols` writable values, initialized when `accumulate`.
unsafe fn product<T: Real>(dst: *mut T, lhs: Mat<T>, rhs: Mat<T>, scale: T, accumulate: bool) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert_eq!(rhs.rows, k, "inner dimensions");
    // SAFETY: `Mat::new` checked that each operand's values lie in its slice
    // (a transpose reads the same values), and the caller vouches for `dst`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
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
