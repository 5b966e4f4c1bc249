# One image for the gateway and the workers (docker-compose.yml picks the command).
# Node 20: the uWebSockets.js build we use ships a native binary for Node 20's ABI only.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY gateway ./gateway
COPY workers ./workers
COPY shared ./shared
COPY console ./console
# The control-room console is built into the image, so the gateway does not build it at boot.
RUN node --import tsx console/build.ts
RUN mkdir -p /data && chown node:node /data
USER node
ENV DATA_DIR=/data HOST=0.0.0.0 PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# A 64 MB young generation: the hot path allocates per position, and the default one spent a third of its CPU in GC.
CMD ["node", "--max-semi-space-size=64", "--import", "tsx", "gateway/main.ts"]
