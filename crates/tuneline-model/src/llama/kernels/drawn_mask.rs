//! The dropout mask drawn on the device of the tensor it masks, as a candle
//! op: on the CPU by [`Dropout::mask`], on CUDA by a kernel of the same hash
//! (`dropout_mask.cu`), so nothing is drawn on the host and copied over, and
//! a run resumed on either device draws the same masks.

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};

use super::dropout::Dropout;

/// The mask [`Dropout::mask`] draws over all of `x` (from element 0), with
/// `x`'s shape, dtype and device.
pub fn drawn_mask(dropout: &Dropout, x: &Tensor) -> Result<Tensor> {
    x.apply_op1_no_bwd(&DrawnMask(*dropout))
}

/// The op behind [`drawn_mask`]: it reads only its input's shape and dtype.
struct DrawnMask(Dropout);

impl CustomOp1 for DrawnMask {
    fn name(&self) -> &'static str {
        "dropout-mask"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let n = layout.shape().elem_count();
        let mask = match storage {
            CpuStorage::F32(_) => CpuStorage::F32(self.0.mask(0, n)),
            CpuStorage::F64(_) => CpuStorage::F64(self.0.mask(0, n)),
            other => bail!("tuneline's kernels run in f32 or f64, not {:?}", other.dtype()),
        };
        Ok((mask, layout.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        storage: &candle_core::CudaStorage,
        layout: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::cuda_backend::CudaStorageSlice;
        let n = layout.shape().elem_count();
        let mask = match &storage.slice {
            CudaStorageSlice::F32(_) => cuda::draw::<f32>(&self.0, &storage.device, n)?,
            CudaStorageSlice::F64(_) => cuda::draw::<f64>(&self.0, &storage.device, n)?,
            _ => bail!("tuneline's kernels run in f32 or f64"),
        };
        Ok((mask, layout.shape().clone()))
    }
}

/// The CUDA side: the kernel compiled to PTX by `build.rs`, launched.
#[cfg(feature = "cuda")]
mod cuda {
    use candle_core::cuda_backend::cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDType, CudaDevice, WrapErr};
    use candle_core::{CudaStorage, Result};

    use super::super::real::Real;
    use super::Dropout;

    include!(concat!(env!("OUT_DIR"), "/ptx.rs"));

    /// `n` elements of `dropout`'s mask, drawn on `device` by the kernel for
    /// `T` (`dropout_mask_f32` or `_f64`).
    pub(super) fn draw<T: Real + CudaDType + DeviceRepr>(
        dropout: &Dropout,
        device: &CudaDevice,
        n: usize,
    ) -> Result<CudaStorage> {
        let name = format!("dropout_mask_{}", T::DTYPE.as_str());
        let func = device.get_or_load_custom_func(&name, "tuneline_dropout_mask", DROPOUT_MASK)?;
        // SAFETY: the kernel writes all `n` elements.
        let out = unsafe { device.alloc::<T>(n)? };
        let (seed, threshold, keep) = (dropout.seed(), dropout.threshold(), dropout.keep::<T>());
        let mut launch = func.builder();
        launch.arg(&out).arg(&n).arg(&seed).arg(&threshold).arg(&keep);
        // SAFETY: the arguments are the kernel's, in its order and types; the
        // grid-stride loop covers any `n` with this grid.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n.min(1 << 30) as u32)) }.w()?;
        Ok(CudaStorage::wrap_cuda_slice(out, device.clone()))
    }
}

/// Needs a CUDA GPU: `cargo test -p tuneline-model --features cuda --lib drawn_mask`.
#[cfg(all(test, feature = "cuda"))]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use super::{drawn_mask, Dropout};

    #[test]
    fn the_gpu_draws_the_mask_the_cpu_draws() {
        let gpu = Device::new_cuda(0).expect("a CUDA GPU");
        for (dtype, n) in [(DType::F32, 1_000_003), (DType::F64, 4_099)] {
            let dropout = Dropout::new(0.1, 0x5eed ^ n as u64);
            let on = |device: &Device| {
                let x = Tensor::zeros(n, dtype, device).unwrap();
                drawn_mask(&dropout, &x)
                    .unwrap()
                    .to_dtype(DType::F64)
                    .unwrap()
                    .to_vec1::<f64>()
                    .unwrap()
            };
            let (cpu, cuda) = (on(&Device::Cpu), on(&gpu));
            let apart = cpu.iter().zip(&cuda).filter(|(a, b)| a != b).count();
            assert_eq!(
                apart, 0,
                "{dtype:?}: {apart} of {n} elements differ between the CPU's mask and the GPU's"
            );
            let kept = cpu.iter().filter(|v| **v != 0.0).count() as f64 / n as f64;
            assert!((kept - 0.9).abs() < 0.01, "{dtype:?}: {kept} kept");
        }
    }
}
