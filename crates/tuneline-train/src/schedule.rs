//! Learning-rate schedules with Hugging Face's semantics
//! (`transformers.get_scheduler`): the rate of optimizer step `k` (0-based)
//! is `learning_rate * factor(k)`, so with warmup the first step has rate 0.

use tuneline_core::config::LrSchedulerType;

/// A schedule over a fixed number of optimizer steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Which schedule follows the warmup: linear, cosine or constant.
    pub kind: LrSchedulerType,
    /// Peak rate.
    pub learning_rate: f64,
    /// Steps of linear warmup.
    pub warmup_steps: u64,
    /// Steps in the whole run.
    pub total_steps: u64,
}

impl Schedule {
    /// HF's `get_warmup_steps`: `ceil(total_steps * warmup_ratio)`.
    pub fn new(
        kind: LrSchedulerType,
        learning_rate: f64,
        warmup_ratio: f64,
        total_steps: u64,
    ) -> Self {
        let warmup_steps = (total_steps as f64 * warmup_ratio).ceil() as u64;
        Self { kind, learning_rate, warmup_steps, total_steps }
    }

    /// The rate of optimizer step `step` (0-based).
    pub fn rate(&self, step: u64) -> f64 {
        self.learning_rate * self.factor(step)
    }

    fn factor(&self, step: u64) -> f64 {
        let (step, warmup, total) =
            (step as f64, self.warmup_steps as f64, self.total_steps as f64);
        let warming = self.kind != LrSchedulerType::Constant && step < warmup;
        if warming {
            return step / warmup.max(1.0);
        }
        match self.kind {
            LrSchedulerType::Constant | LrSchedulerType::ConstantWithWarmup => 1.0,
            LrSchedulerType::Linear => ((total - step) / (total - warmup).max(1.0)).max(0.0),
            LrSchedulerType::Cosine => {
                let progress = (step - warmup) / (total - warmup).max(1.0);
                (0.5 * (1.0 + (std::f64::consts::PI * progress).cos())).max(0.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(kind: LrSchedulerType) -> Vec<f64> {
        let s = Schedule::new(kind, 1.0, 0.2, 10);
        assert_eq!(s.warmup_steps, 2);
        (0..=10).map(|k| s.rate(k)).collect()
    }

    fn close(a: &[f64], b: &[f64]) {
        assert!(a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12), "{a:?} != {b:?}");
    }

    #[test]
    fn schedules_follow_transformers() {
        // transformers' get_*_schedule_with_warmup(num_warmup_steps=2, num_training_steps=10), steps 0..=10.
        close(
            &rates(LrSchedulerType::Linear),
            &[0.0, 0.5, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125, 0.0],
        );
        let cosine: Vec<f64> = (0..=10)
            .map(|k| {
                if k < 2 {
                    k as f64 / 2.0
                } else {
                    0.5 * (1.0 + (std::f64::consts::PI * (k - 2) as f64 / 8.0).cos())
                }
            })
            .collect();
        close(&rates(LrSchedulerType::Cosine), &cosine);
        close(&rates(LrSchedulerType::Cosine)[..4], &[0.0, 0.5, 1.0, 0.9619397662556434]);
        close(
            &rates(LrSchedulerType::ConstantWithWarmup),
            &[0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        );
        close(&rates(LrSchedulerType::Constant), &[1.0; 11]);
    }
}
