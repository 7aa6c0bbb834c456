//! From a [`Config`] to what the method needs: [`TmasParams`] (N, M, T, ε, sampling per
//! role, …) and the prompt-template overrides. In the method layer: the config knows
//! nothing of the method's types.

use crate::config::Config;
use crate::method::{PromptOverrides, RoleCall, RoleCalls, TmasParams};
use crate::role::Role;

impl Config {
    /// The TMAS parameters, with derived defaults applied.
    pub fn tmas_params(&self) -> TmasParams {
        let m = &self.method;
        TmasParams {
            n: m.n as usize,
            m: m.m as usize,
            iterations: m.iterations,
            epsilon: m.epsilon,
            max_rollouts: m.max_rollouts.map(|v| v as usize),
            include_past_solutions: m.include_past_solutions,
            no_proof: m.no_proof,
            strict_verification: m.strict_verification,
            early_stop: m.early_stop,
            use_experience: m.use_experience,
            use_guideline: m.use_guideline,
            dedup_threshold: m.dedup_threshold,
            max_verification_attempts: m.effective_max_verification_attempts(),
            max_bank_attempts: m.max_bank_attempts,
            seed: self.run.seed,
            release_texts: false,
            roles: RoleCalls::from_fn(|role| self.role_call(role)),
        }
    }

    /// Sampling of `role` and whether its calls stream: they do when every endpoint of
    /// the role's group has `stream = true` (a mixed group does not stream, the setting
    /// every server supports).
    pub fn role_call(&self, role: Role) -> RoleCall {
        let eps = self.role_endpoints(role);
        let stream = !eps.is_empty()
            && eps
                .iter()
                .all(|e| self.endpoints.get(e).is_some_and(|e| e.stream));
        RoleCall {
            sampling: self.roles[role].sampling(),
            stream,
        }
    }

    /// Template name → replacement file: `[prompts]` plus each `roles.ROLE.prompt` (as the
    /// template named after the role).
    pub fn prompt_overrides(&self) -> PromptOverrides {
        let mut out = self.prompts.clone();
        for role in Role::ALL {
            if let Some(p) = &self.roles[role].prompt {
                out.insert(role.as_str().to_string(), p.clone());
            }
        }
        out
    }
}
