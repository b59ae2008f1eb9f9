cd /work/wt/ramp
export PATH=/work/main/.venv/bin:$PATH PYTHONPATH=/work/wt/ramp
export RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S=1 RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S=1
python -m bench.ramp --model /tmp/ramp-run/tiny --serve-config /tmp/ramp-run/cpu.yaml \
  --engine '{"max_model_len": 2048, "max_num_seqs": 4}' --users 2,16,2 --step-users 7 --step-s 5 \
  --hold-s 5,150,60 --autoscaling '{"target_ongoing_requests":4,"upscale_delay_s":3,"downscale_delay_s":10,"look_back_period_s":5}' \
  --warmup 2 --pool 100 --budget-s 560 --out /tmp/ramp-run/vllm
